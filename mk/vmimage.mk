# The VM guest image (docs/vm-image.md): the node image's rootfs + kernel, cloud-init (NoCloud,
# ConfigDrive) and the workload image pre-loaded, as a qcow2 disk with its kernel and initrd for
# direct kernel boot. The local provider boots it with QEMU (docs/local-vm.md); a libvirt Nova
# compute boots it from Glance.
VM_IMAGE_DIR := $(ROOT)/build/vm-image
VM_PACKAGES := qemu-system-x86 qemu-utils genisoimage
CI_PREREQS += vm-image

.PHONY: vm-image vm-prereqs
vm-prereqs: ## install QEMU, qemu-img and genisoimage when root (Debian), otherwise say what is missing
	@$(call apt_install,$(VM_PACKAGES),missing system packages (install them, or VM rows will be skipped),true)

# The node image it is made from is brought up to date first, except beside the tests (.ci/run's
# background build passes VM_IMAGE_NODE_DEP= ): there the devcloud deploys nodes from that file, and
# a rebuild under them mixed two images in one node (run JJ: the node's root filesystem from the
# first, its Docker store from the second; test_node_image_carries_the_workload_image... failed).
VM_IMAGE_NODE_DEP ?= node-image
vm-image: vm-prereqs $(VM_IMAGE_NODE_DEP) ## build the VM guest image in build/vm-image/ (rebuilt only when its inputs change)
	@docker/build-vm-image.sh --out $(VM_IMAGE_DIR)
