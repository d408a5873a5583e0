# The devcloud's Kubernetes control plane (docs/kubernetes.md): kube-apiserver, controller-manager
# and scheduler 1.20.2 built from Debian's `kubernetes` source package with Debian's Go (cached in
# ~/.cache/dlbench/kube/<version>, rebuilt only when the version changes), Debian's etcd, and our
# node agent (devcloud/k8s_node.py) in the kubelet's place. Each cluster (the kubernetes tier's,
# each Magnum cluster) starts its own from devcloud/k8s_control.py.
# What devcloud/build-kube.sh needs (Go, dpkg-source, the archive key for the source's signature)
# and etcd, which the control planes run. Its own target, so CI installs these first and compiles
# the servers (CPU) while apt installs the rest (network and disk): .ci/run.
KUBE_PACKAGES := golang-1.19-go rsync jq etcd-server dpkg-dev make debian-archive-keyring
DEVCLOUD_PACKAGES += $(KUBE_PACKAGES)
CI_PREREQS += kube

.PHONY: kube kube-packages
kube-packages: ## the Debian packages the Kubernetes servers' build and etcd need (as root)
	@$(call apt_install,$(KUBE_PACKAGES),kube: missing system packages,exit 1)

kube: kube-packages ## build the Kubernetes servers 1.20.2 from Debian's source (once per version, ~3-6 min)
	@devcloud/build-kube.sh
