# Nova VMs: tests against the devcloud's real Nova (docs/nova.md, docs/devcloud-nova.md).
.PHONY: test-nova run-devcloud-four
test-nova: venv ## Nova driver and provider=nova end to end (needs `make devcloud-up`)
	$(PY) -m pytest tests/nova -q

# All four hosting options of the core study in one run on the devcloud: bare metal and containers
# on bare metal from Ironic, VMs and containers on VMs from Nova; smoke TensorFlow + CPU suite.
DEVCLOUD_FOUR_CONF = {"profile": "smoke", "providers": ["ironic", "nova"], "suites": ["tf_cnn", "cpu"], \
  "models": ["alexnet"], "data": ["synthetic"], \
  "platforms": ["bare_metal", "container_on_bare_metal", "virtual_machine", "container_on_vm"], \
  "ironic": {"cloud": "devcloud", "clouds_file": "$(ROOT)/.devcloud/clouds.yaml", "nodes": {"bare_metal": 1}, \
  "share_nodes": true, "image_source": "file://$(ROOT)/build/node-image/dlbench-node.tar.zst", "poll_interval": 0.5}, \
  "nova": {"cloud": "devcloud-nova", "clouds_file": "$(ROOT)/.devcloud/clouds.yaml", "flavor": "dlbench.small", \
  "image": "dlbench-node", "network": "devcloud-net", "nodes": {"virtual_machine": 1}, "share_nodes": true, \
  "poll_interval": 0.5}}
run-devcloud-four: ## `make run` comparing BM, container on BM, VM, container on VM (Ironic + Nova on the devcloud)
	$(MAKE) run RUN_CONF='$(DEVCLOUD_FOUR_CONF)'
