# The devcloud's Kubernetes control plane (docs/kubernetes.md): kube-apiserver, controller-manager
# and scheduler 1.20.2 built from Debian's `kubernetes` source package with Debian's Go (cached in
# ~/.cache/dlbench/kube/<version>, rebuilt only when the version changes), Debian's etcd, and our
# node agent (devcloud/k8s_node.py) in the kubelet's place. Each cluster (the kubernetes tier's,
# each Magnum cluster) starts its own from devcloud/k8s_control.py.
DEVCLOUD_PACKAGES += golang-1.19-go rsync jq etcd-server
CI_PREREQS += kube

.PHONY: kube
kube: devcloud-packages ## build the Kubernetes servers 1.20.2 from Debian's source (once per version, ~3-6 min)
	@devcloud/build-kube.sh
