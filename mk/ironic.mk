# Ironic bare metal: tests against the devcloud (docs/openstack.md, docs/devcloud.md).
.PHONY: test-ironic janitor
test-ironic: venv ## Ironic driver, SSH executor, janitor and provider=ironic end to end (needs `make devcloud-up`)
	$(PY) -m pytest tests/ironic -q

janitor: airflow-init ## run the leak janitor once (JANITOR_CONF='{"dry_run": true}' to only report)
	$(PY) -c "import json, sys; from airflow.dag_processing.dagbag import DagBag; \
	dag = DagBag(dag_folder='$(ROOT)/dags/dlbench_janitor.py').dags['dlbench_janitor']; \
	run = dag.test(run_conf=json.loads(sys.argv[1])); sys.exit(0 if str(run.state).endswith('success') else 1)" \
	'$(or $(JANITOR_CONF),{})'

# `make run` on the devcloud: provider ironic, 2 nodes from the node image, both platforms sharing them.
DEVCLOUD_RUN_CONF = {"profile": "smoke", "provider": "ironic", "platforms": ["bare_metal", "container_on_bare_metal"], \
  "ironic": {"cloud": "devcloud", "clouds_file": "$(ROOT)/.devcloud/clouds.yaml", "nodes": {"bare_metal": 2}, \
  "share_nodes": true, "image_source": "file://$(ROOT)/build/node-image/dlbench-node.tar.zst", "poll_interval": 0.5}}
.PHONY: run-devcloud
run-devcloud: ## `make run` against the devcloud (provider ironic; needs devcloud-up and node-image)
	$(MAKE) run RUN_CONF='$(DEVCLOUD_RUN_CONF)'
