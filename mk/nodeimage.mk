# The project's bare-metal node image (docs/node-image.md): a Debian rootfs with the benchmark
# tools, Docker, the workload venv and the workloads, and the TensorFlow workload image pre-loaded
# in its Docker store, so a deployed node needs no preparation.
NODE_IMAGE := $(ROOT)/build/node-image/dlbench-node.tar.zst
CI_PREREQS += node-image

# Two stages (docker/build-node-image.sh --stage): the root filesystem (debootstrap and the
# frameworks' venv, the slow part) needs no workload image, so it builds beside the workload
# images; only the pre-load and the packing wait for the TensorFlow one. Without a Docker engine:
# `make node-image NODE_IMAGE_ARGS=--no-workload-image` (the prepare stage then loads the image).
NODE_IMAGE_ARGS ?=
.PHONY: node-image node-rootfs
node-rootfs: venv wheelhouse ## build the node image's root filesystem (the first stage of node-image)
	@docker/build-node-image.sh --variant dlbench-node --stage rootfs --out $(NODE_IMAGE)

node-image: node-rootfs image-tensorflow ## build the node image build/node-image/dlbench-node.tar.zst (rebuilt only when its inputs change)
	@docker/build-node-image.sh --variant dlbench-node --stage image --out $(NODE_IMAGE) $(NODE_IMAGE_ARGS)
