# The project's bare-metal node image (docs/node-image.md): a Debian rootfs with the benchmark
# tools, Docker, the workload venv and the workloads, so a deployed node needs no preparation.
NODE_IMAGE := $(ROOT)/build/node-image/dlbench-node.tar.zst
CI_PREREQS += node-image

.PHONY: node-image
node-image: venv wheelhouse ## build the node image build/node-image/dlbench-node.tar.zst (rebuilt only when its inputs change)
	@docker/build-node-image.sh --variant dlbench-node --out $(NODE_IMAGE)
