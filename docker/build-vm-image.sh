#!/usr/bin/env bash
# Build the project's VM guest image (docs/vm-image.md): a bootable Debian 12 disk for QEMU/KVM,
# the local provider's virtual_machine platform and a Glance image for a libvirt Nova compute.
#
#   docker/build-vm-image.sh [--out DIR] [--force]
#
# Base: the node image rootfs (build/node-image/dlbench-node.tar.zst, `make node-image`): Debian 12
# with the benchmark tools, Docker, the workload venv and the workloads. Added from Debian
# packages: linux-image-amd64 (+ initramfs), systemd, cloud-init (datasources NoCloud and
# ConfigDrive), DHCP on the first NIC as a fallback, sshd (key authentication, root by key),
# a serial console. The TensorFlow workload image (dlbench-workload:latest, the default request's
# and every suite's but another framework's tf_cnn) comes pre-loaded in the node image's Docker
# store (docker/build-node-image.sh, docker/preload-image.sh), so container_on_vm needs no 2 GB
# `docker load` under emulation (a node image built with --no-workload-image leaves it out: the
# prepare stage then loads it over SSH). The PyTorch and JAX images are not (they would add about
# 1.7 GB to every guest disk): a run that names them loads them over SSH.
#
# Output in DIR (default build/vm-image):
#   dlbench-vm.qcow2   the root filesystem (ext4, label dlbench-root, no partition table)
#   vmlinuz, initrd.img  for direct kernel boot: -kernel/-initrd/-append "$(jq -r .cmdline manifest)"
#   manifest.json      what is inside, sizes, the inputs digest (a rebuild happens only when it changes)
#
# No loop device and no mount of the image: the filesystem is made from the directory with
# `mkfs.ext4 -d`; the build runs in a private mount namespace (the overlay over the node image's
# extracted root, the chroot's mounts: nothing is left mounted on the host).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
out=$repo/build/vm-image
force=0
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --force) force=1; shift ;;
    *) echo "usage: $0 [--out DIR] [--force]" >&2; exit 2 ;;
  esac
done
project_node_tar=$repo/build/node-image/dlbench-node.tar.zst
node_tar=${NODE_IMAGE:-$project_node_tar}
label=dlbench-root
cmdline="root=LABEL=$label ro console=tty0 console=ttyS0,115200n8 net.ifnames=0 quiet"
# Only what a bootable cloud guest adds to the node image's rootfs (apparmor: the Debian kernel enables it,
# and Docker refuses to start containers without its parser then).
packages="linux-image-amd64 initramfs-tools systemd-sysv udev cloud-init isc-dhcp-client dbus kmod apparmor"

[ "$(id -u)" = 0 ] || { echo "building the VM image needs root (chroot)" >&2; exit 1; }
for tool in mkfs.ext4 qemu-img unshare chroot; do
  command -v $tool >/dev/null || { echo "$tool is not installed (apt-get install qemu-utils e2fsprogs)" >&2; exit 1; }
done
[ -f "$node_tar" ] || { echo "no node image $node_tar: run \`make node-image\` first" >&2; exit 1; }

inputs() {  # everything the result depends on, digested into the manifest
  sha256sum "$0" | cut -d' ' -f1
  cat "$node_tar.stamp" 2>/dev/null || stat -c '%s %Y' "$node_tar"
  echo "$packages|$cmdline"
}
digest=$(inputs | sha256sum | cut -d' ' -f1)
manifest=$out/manifest.json
if [ "$force" = 0 ] && [ -f "$out/dlbench-vm.qcow2" ] && [ -f "$manifest" ] &&
   grep -q "\"inputs_digest\": \"$digest\"" "$manifest"; then
  echo "VM image up to date: $out/dlbench-vm.qcow2"; exit 0
fi

# The rest in a private mount namespace: the overlay below and the chroot's mounts go with it.
if [ -z "${DLBENCH_VM_BUILD_NS:-}" ]; then
  DLBENCH_VM_BUILD_NS=1 exec unshare --mount --propagation private "$0" "${args[@]}"
fi

mkdir -p "$out" "$repo/build/apt-cache/partial"
work=$(mktemp -d "$out/.build.XXXXXX")
root=$work/rootfs
cleanup() {
  umount "$root" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)
log=$work/build.log
step() { echo "[$(( $(date +%s) - start )) s] $*"; }

# Disk: the guest's tree is the node image's root, read-only, under an overlay whose upper layer
# takes only what this build adds or removes (about 0.5 GB). The lower is the devcloud's own
# extraction of the same node image (devcloud/machine.py root: made once, shared with the
# devcloud's nodes), so the build no longer holds a second 5.4 GB copy of it: stop 54's CI run held
# 12 GB for this build at its peak (tree + raw filesystem), 674 s in, the run's lowest point. A
# node image other than the project's (NODE_IMAGE=...) is unpacked into the tree as before.
mkdir -p "$root"
if [ "$(realpath "$node_tar")" = "$(realpath -m "$project_node_tar")" ]; then
  step "the node image's root: the devcloud's extraction of $node_tar, under an overlay"
  lower=$(python3 "$repo/devcloud/machine.py" root --image dlbench-node)
  [ -d "$lower" ] || { echo "no extracted root of $node_tar (devcloud/machine.py root said: $lower)" >&2; exit 1; }
  mkdir -p "$work/upper" "$work/overlay-work"
  mount -t overlay overlay -o "lowerdir=$lower,upperdir=$work/upper,workdir=$work/overlay-work" "$root"
  rm -f "$root/.devcloud-extracted"  # the extraction's own marker, not the guest's
else
  step "unpacking the node image $node_tar"
  tar -C "$root" --numeric-owner --xattrs --xattrs-include='*' -xf "$node_tar"
fi

step "installing $packages (apt, this host's mirror; log: $log)"
cp /etc/resolv.conf "$root/etc/resolv.conf"  # for apt only; emptied again below
unshare --mount --propagation private --fork bash -euo pipefail -c '
  root=$1; cache=$2; packages=$3
  mount -t proc proc "$root/proc"
  mount -t sysfs sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount --bind "$cache" "$root/var/cache/apt/archives"
  # No service may start inside the chroot.
  printf "#!/bin/sh\nexit 101\n" >"$root/usr/sbin/policy-rc.d"; chmod 755 "$root/usr/sbin/policy-rc.d"
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive /bin/sh -euc "
      apt-get -q update
      apt-get -q install -y --no-install-recommends $packages
    "
  rm -f "$root/usr/sbin/policy-rc.d"
' build-vm-image "$root" "$repo/build/apt-cache" "$packages" >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
kernel=$(basename "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)"); kver=${kernel#vmlinuz-}
[ -f "$root/boot/initrd.img-$kver" ] || { echo "no initrd for $kver" >&2; tail -n 40 "$log" >&2; exit 1; }

step "configuring the guest (cloud-init, network fallback, sshd, serial console)"
: >"$root/etc/resolv.conf"
: >"$root/etc/machine-id"   # empty: systemd makes a fresh one on the first boot of every guest
echo "LABEL=$label / ext4 defaults,errors=remount-ro 0 1" >"$root/etc/fstab"
mkdir -p "$root/etc/cloud/cloud.cfg.d" "$root/etc/systemd/network" "$root/etc/docker"
cat >"$root/etc/cloud/cloud.cfg.d/90-dlbench.cfg" <<'EOF'
# dlbench VM image (docs/vm-image.md): a seed ISO (local provider) or a Nova config drive.
datasource_list: [NoCloud, ConfigDrive, None]
# The run's key logs in as root (MachineSettings.ssh_user defaults to root).
disable_root: false
ssh_pwauth: false
# Fewer, faster host keys: keygen is slow under emulation.
ssh_genkeytypes: [ed25519, ecdsa]
# Nova grows the root disk to the flavor: grow the filesystem with it (no partition table).
resize_rootfs: true
growpart: {mode: off}
apt_preserve_sources_list: true
package_update: false
package_upgrade: false
EOF
# DHCP on the first NIC whatever the datasource says (cloud-init writes its own, more specific one).
cat >"$root/etc/systemd/network/99-dlbench-dhcp.network" <<'EOF'
[Match]
Name=eth0 en*

[Network]
DHCP=yes
EOF
ln -sf /lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
# Do not wait up to 2 minutes for "online": sshd answers as soon as the address is there.
ln -sf /dev/null "$root/etc/systemd/system/systemd-networkd-wait-online.service"
# No apt or man-db jobs in a benchmarked guest (they would compete with the workload).
for unit in apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer dpkg-db-backup.timer; do
  rm -f "$root/etc/systemd/system/timers.target.wants/$unit"
done
# The guest's Docker bridge in the benchmarking range (as the host's, mk/docker.mk).
echo '{"bip": "198.18.200.1/24"}' >"$root/etc/docker/daemon.json"
# A stale workload context (the controller's code changed since the build) then only re-pushes
# the package: the venv, its frameworks and their requirements are recorded as installed
# (execution/prepare.py), as the node image's marker says (all three frameworks, one venv).
python3 - "$root" <<'EOF'
import json, sys
root = sys.argv[1]
marker = json.load(open(f"{root}/etc/dlbench/node-image.json"))
json.dump({"context": marker["context"], "frameworks": marker["frameworks"], "requirements": marker["requirements"],
           "python": marker["python"], "pythonpath": marker["pythonpath"], "python_version": "3.11",
           "prepared_at": marker["built_at"]},
          open(f"{root}/opt/dlbench/prepared.json", "w"), indent=2)
EOF

step "slimming and making the filesystem"
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"; cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* "$root"/usr/share/man/* \
       "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/var/lib/cloud/* "$root"/tmp/* 2>/dev/null || true
used_mb=$(du -sxm "$root" | cut -f1)
size_mb=$(( used_mb * 5 / 4 + 2048 ))   # 25 % for metadata + 2 GiB free for workloads and data
# From the node image's marker: its workload context and the workload image its Docker store
# carries (none when it was built with --no-workload-image).
read -r context workload_image image_id < <(python3 -c 'import json,sys
marker = json.load(open(sys.argv[1]))
images = marker.get("docker_images") or [{"image": "", "id": ""}]
print(marker["context"], images[0]["image"], images[0]["id"])' "$root/etc/dlbench/node-image.json")
mkfs.ext4 -q -F -L "$label" -d "$root" -E root_owner=0:0 -m 1 "$work/root.ext4" "${size_mb}M" >>"$log" 2>&1 ||
  { tail -n 20 "$log" >&2; exit 1; }
# Disk: the tree (its overlay's upper layer) goes as soon as the filesystem holds it, and the qcow2
# is zstd-compressed (about 6.0 GB -> 1.8 GB in 18 s here; guests read through a qcow2 overlay of
# their own, so only the clusters they read are decompressed, once). At the peak the build holds the
# raw filesystem and the upper layer, instead of the tree, the raw filesystem and the qcow2 (3 x).
umount "$root" 2>/dev/null || true
rm -rf "$root" "$work/upper" "$work/overlay-work"
qemu-img convert -c -o compression_type=zstd -m 8 -W -O qcow2 "$work/root.ext4" "$work/dlbench-vm.qcow2"
rm -f "$work/root.ext4"

built=$(( $(date +%s) - start ))
qcow_bytes=$(stat -c %s "$work/dlbench-vm.qcow2")
cat >"$work/manifest.json" <<EOF
{
  "image": "dlbench-vm",
  "os": "Debian 12 (bookworm)",
  "kernel": "$kver",
  "cmdline": "$cmdline",
  "root_label": "$label",
  "disk": "dlbench-vm.qcow2",
  "disk_format": "qcow2",
  "disk_bytes": $qcow_bytes,
  "virtual_size_mb": $size_mb,
  "used_mb": $used_mb,
  "base": "$(basename "$node_tar") ($(cat "$node_tar.stamp" 2>/dev/null | cut -c1-16))",
  "added_packages": "$packages",
  "cloud_init_datasources": ["NoCloud", "ConfigDrive"],
  "context": "$context",
  "workload_image": "$workload_image",
  "workload_image_id": "$image_id",
  "inputs_digest": "$digest",
  "build_seconds": $built,
  "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
EOF
mv -f "$work/dlbench-vm.qcow2" "$work/vmlinuz" "$work/initrd.img" "$out/"
mv -f "$work/manifest.json" "$manifest"   # last: a complete image is one with a current manifest
step "built the VM image in $built s: $out/dlbench-vm.qcow2 ($(( qcow_bytes / 1048576 )) MiB, kernel $kver)"
