#!/usr/bin/env bash
# Build a bare-metal node image as a root-filesystem tarball with debootstrap (docs/node-image.md).
#
#   docker/build-node-image.sh [--variant dlbench-node|stock] [--out FILE] [--stage rootfs|image|all]
#                              [--no-workload-image] [--force]
#
#   dlbench-node (default; `make node-image`): the project's own node image. Everything a
#     benchmarked machine needs, installed at image-build time so a freshly deployed node needs
#     no preparation: the benchmark tools of the workload image, Debian's Docker engine, ONE venv
#     /opt/dlbench/venv with every framework's requirements (requirements-workload*.txt:
#     TensorFlow, PyTorch and JAX together; a bare-metal node runs whatever the request names;
#     offline, from build/wheelhouse: run `make wheelhouse` first), the workloads package in
#     /opt/dlbench/include, HPCG prebuilt at /opt/dlbench/bin/dlbench-hpcg, and the marker
#     /etc/dlbench/node-image.json (with the frameworks installed and their requirements digest),
#     and the TensorFlow workload image (WORKLOAD_IMAGE, default dlbench-workload:latest: the default
#     request's and every suite's but another framework's tf_cnn) pre-loaded into its Docker store
#     /var/lib/docker, so container_on_bare_metal needs no 2 GB `docker load` over SSH on a fresh
#     node (--no-workload-image leaves it out; the PyTorch and JAX images are loaded when a run
#     names them). Default output: build/node-image/dlbench-node.tar.zst
#     Two stages, so the slow part needs no workload image (make runs them as two targets, the
#     first beside the workload image's build): `rootfs` (debootstrap, venv, HPCG, marker; the tree
#     is kept in FILE's directory as dlbench-node.rootfs/) and `image` (pre-load the workload image
#     into that tree, or into the current tarball's root when only the image changed, and pack it).
#     `all` (the default) runs both.
#   stock (`make devcloud-images`): what a Debian generic cloud image has (python3, sshd, sudo...)
#     and nothing of dlbench. Default output: .devcloud/images/stock.tar
#
# Rebuilds only when its inputs change: FILE.stamp records a digest of the script, the package
# list, the suite and mirror, and (dlbench-node) the workload context digest and the wheelhouse.
# Downloaded .debs are kept in build/debootstrap-cache/<variant>, so a rebuild does not download again.
# The debootstrap mirror is the host's (as docker/build-base.sh finds it); DEBIAN_MIRROR overrides.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
variant=dlbench-node
out=""
force=0
stage=all
preload=1
workload_image=${WORKLOAD_IMAGE:-dlbench-workload:latest}
usage="usage: $0 [--variant dlbench-node|stock] [--out FILE] [--stage rootfs|image|all] [--no-workload-image] [--force]"
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) variant=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --stage) stage=$2; shift 2 ;;
    --no-workload-image) preload=0; shift ;;
    --force) force=1; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
case "$stage" in rootfs|image|all) ;; *) echo "$usage" >&2; exit 2 ;; esac
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
mirror=${mirror:-http://deb.debian.org/debian}
py=${PYTHON:-$repo/.venv/bin/python}
# A Debian generic cloud image, minus cloud-init (the devcloud's node agent plays it).
stock_packages=python3,openssh-server,sudo,ca-certificates,iproute2,procps,iputils-ping,tar,gzip
# The workload image's tools (docker/Dockerfile, docker/build-base.sh) and Debian's Docker engine.
node_packages=$stock_packages,python3-venv,fio,ioping,iperf3,hpcc,openmpi-bin,strace,gcc,libc6-dev,docker.io
case "$variant" in
  stock) packages=$stock_packages; out=${out:-$repo/.devcloud/images/stock.tar}; preload=0; stage=all ;;
  dlbench-node) packages=$node_packages; out=${out:-$repo/build/node-image/dlbench-node.tar.zst} ;;
  *) echo "unknown variant $variant (dlbench-node or stock)" >&2; exit 2 ;;
esac
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
command -v zstd >/dev/null || { echo "zstd is not installed (apt-get install zstd)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "building a rootfs needs root (debootstrap, chroot)" >&2; exit 1; }
wheelhouse=$repo/build/wheelhouse

inputs() {  # everything the result depends on, digested into the stamp
  sha256sum "$0" | cut -d' ' -f1
  echo "$variant $suite $mirror $packages"
  if [ "$variant" = dlbench-node ]; then
    context
    (cd "$wheelhouse" && find . -maxdepth 1 -name '*.whl' -printf '%f %s\n' | sort)
  fi
}
context() {  # the workload context digest the product compares with (dlbench.execution.image)
  (cd "$repo" && "$py" -c "from dlbench.execution.image import context_digest; print(context_digest())")
}
requirements() {  # the digest of the training frameworks' requirement files (what the venv holds), as prepare.py records it
  (cd "$repo" && "$py" -c "from dlbench.execution.prepare import requirements_digest
from dlbench.workloads.profiles import TRAINING_FRAMEWORKS
print(requirements_digest(list(TRAINING_FRAMEWORKS)))")
}
requirement_files="requirements-workload.txt requirements-workload-pytorch.txt requirements-workload-jax.txt"
if [ "$variant" = dlbench-node ]; then
  [ -x "$py" ] || { echo "no $py (make venv): it computes the workload context digest" >&2; exit 1; }
  ls "$wheelhouse"/*.whl >/dev/null 2>&1 || { echo "no wheels in $wheelhouse: run \`make wheelhouse\` first" >&2; exit 1; }
fi
# The stamp: "<digest of everything> <digest of the root filesystem's inputs>" (the second says
# whether the tarball's root can take a new workload image without a rebuild).
stamp=$out.stamp
rootfs_digest=$(inputs | sha256sum | cut -d' ' -f1)
digest=$rootfs_digest
image_id=""
if [ "$preload" = 1 ] && [ "$stage" != rootfs ]; then
  image_id=$(docker image inspect --format '{{.Id}}' "$workload_image" 2>/dev/null) || {
    echo "no workload image $workload_image in the local Docker engine to pre-load: run \`make image\`," \
         "or pass --no-workload-image" >&2; exit 1; }
  digest=$(printf '%s %s %s\n' "$rootfs_digest" "$workload_image" "$image_id" | sha256sum | cut -d' ' -f1)
fi
stamp_digest=""; stamp_rootfs=""
[ -f "$stamp" ] && read -r stamp_digest stamp_rootfs <"$stamp" || true
tree=${out%%.tar*}.rootfs  # the rootfs stage's tree, until the image stage packs it
tree_current() { [ -d "$tree" ] && [ "$(cat "$tree.stamp" 2>/dev/null)" = "$rootfs_digest" ]; }
if [ "$force" = 0 ] && [ "$stage" != rootfs ] && [ -f "$out" ] && [ "$stamp_digest" = "$digest" ]; then
  rm -rf "$tree" "$tree.stamp"
  echo "$variant image up to date: $out"; exit 0
fi
if [ "$force" = 0 ] && [ "$stage" = rootfs ] &&
   { tree_current || { [ -f "$out" ] && [ "${stamp_rootfs:-$stamp_digest}" = "$rootfs_digest" ]; }; }; then
  echo "$variant root filesystem up to date"; exit 0
fi

# One cache per variant: the stock and node images are built side by side in CI (make -j).
cache=$repo/build/debootstrap-cache/$variant
mkdir -p "$(dirname "$out")" "$cache"
work=$(mktemp -d "$(dirname "$out")/.build-$variant.XXXXXX")
root=$work/rootfs
cleanup() {
  # Mounts made for the chroot steps live in a private mount namespace (unshare below), so
  # nothing is left mounted even when a step fails; only the files go.
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)
reuse=0  # the image stage reuses a current root; `all` does too unless --force
{ [ "$stage" = image ] || { [ "$stage" = all ] && [ "$force" = 0 ]; }; } && reuse=1
if [ "$reuse" = 1 ] && tree_current; then
  mv "$tree" "$root"; rm -f "$tree.stamp"
elif [ "$reuse" = 1 ] && [ -f "$out" ] && [ "${stamp_rootfs:-$stamp_digest}" = "$rootfs_digest" ]; then
  echo "the $variant root filesystem is current: only its workload image changes"
  mkdir -p "$root"
  tar -C "$root" --numeric-owner --xattrs --xattrs-include='*' -xf "$out"
  rm -rf "$root/var/lib/docker"
elif [ "$stage" = image ]; then
  echo "the $variant root filesystem is missing or stale: run $0 --stage rootfs first (make node-image does)" >&2
  exit 1
else
echo "building the $variant image with debootstrap ($suite from $mirror); log: $work/debootstrap.log"
debootstrap --variant=minbase --include="$packages" --cache-dir="$cache" \
  "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

# Like a cloud image: no host identity baked in. SSH host keys are generated on each machine's
# first boot (so every node has its own), the hostname comes from the config drive.
rm -f "$root"/etc/ssh/ssh_host_*
echo localhost >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
: >"$root/etc/resolv.conf"
rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
mkdir -p "$root/etc/ssh/sshd_config.d"
cat >"$root/etc/ssh/sshd_config.d/50-cloud-image.conf" <<'EOF'
# As on a Debian generic cloud image: key authentication only (root: key only).
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
EOF

if [ "$variant" = dlbench-node ]; then
  ctx=$(context)
  req=$(requirements)
  mkdir -p "$root/opt/dlbench/include/dlbench" "$root/opt/dlbench/bin" "$root/etc/dlbench" "$root/tmp/wheelhouse"
  # Exactly what docker/Dockerfile copies: only the workloads (they never import Airflow).
  cp "$repo/include/dlbench/__init__.py" "$root/opt/dlbench/include/dlbench/__init__.py"
  (cd "$repo/include/dlbench" && tar --exclude=__pycache__ --exclude='*.pyc' -cf - workloads) |
    tar -C "$root/opt/dlbench/include/dlbench" -xf -
  for f in $requirement_files; do cp "$repo/$f" "$root/tmp/$f"; done
  # The venv and HPCG are made inside the image's own root (its python3, its gcc), with the
  # wheelhouse bind-mounted read-only; the mounts die with the private mount namespace.
  unshare --mount --propagation private --fork bash -euo pipefail -c '
    root=$1; wheelhouse=$2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind "$wheelhouse" "$root/tmp/wheelhouse"; mount -o remount,bind,ro "$root/tmp/wheelhouse"
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /bin/sh -euc "
        python3 -m venv /opt/dlbench/venv
        /opt/dlbench/venv/bin/pip install -q --no-index --find-links /tmp/wheelhouse -r /tmp/requirements-workload.txt -r /tmp/requirements-workload-pytorch.txt -r /tmp/requirements-workload-jax.txt
        /opt/dlbench/venv/bin/pip check
        gcc -O3 -o /opt/dlbench/bin/dlbench-hpcg /opt/dlbench/include/dlbench/workloads/micro/hpcg.c -lm
      "
  ' build-node-image "$root" "$wheelhouse" >>"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$root/tmp/wheelhouse"; for f in $requirement_files; do rm -f "$root/tmp/$f"; done
  find "$root/opt/dlbench" -name __pycache__ -prune -exec rm -rf {} +
  cat >"$root/etc/dlbench/node-image.json" <<EOF
{"image": "dlbench-node", "context": "$ctx", "python": "/opt/dlbench/venv/bin/python", "pythonpath": "/opt/dlbench/include", "frameworks": ["tensorflow", "pytorch", "jax"], "requirements": "$req", "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF
fi

# Slim: no apt lists or caches, no docs (as docker/build-base.sh).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/var/log/*.log "$root"/var/log/apt/*
fi  # the root filesystem is there

if [ "$stage" = rootfs ]; then
  rm -rf "$tree"; mv "$root" "$tree"; echo "$rootfs_digest" >"$tree.stamp"
  echo "built the $variant root filesystem in $(( $(date +%s) - start )) s: $tree"; exit 0
fi
if [ "$preload" = 1 ]; then
  echo "pre-loading $workload_image into the image's Docker store (a private dockerd on its data root)"
  "$here/preload-image.sh" "$root" "$workload_image" "$work/dockerd" "$work/preload.log" ||
    { tail -n 30 "$work/preload.log" >&2; exit 1; }
  # The marker says which workload image the store carries (its id and workload context).
  ctx_label=$(docker image inspect --format '{{index .Config.Labels "dlbench.context"}}' "$workload_image")
  python3 - "$root/etc/dlbench/node-image.json" "$workload_image" "$image_id" "$ctx_label" <<'EOF'
import json, sys
path, image, image_id, context = sys.argv[1:]
marker = json.load(open(path))
marker["docker_images"] = [{"image": image, "id": image_id, "context": context}]
json.dump(marker, open(path, "w"))
EOF
fi
# File capabilities (ping's cap_net_raw) travel as xattrs. An output named *.zst is compressed on the
# way out (the node image: 3.4 GB of tree -> about 0.8 GB in some 10 s here; GNU tar and the devcloud
# recognise zstd when they extract), so the build never holds the tree and a second full copy.
case "$out" in
  *.zst) tar -C "$root" --numeric-owner --xattrs --xattrs-include='*' -cf - . | zstd -q -T0 -3 -o "$work/image" ;;
  *) tar -C "$root" --numeric-owner --xattrs --xattrs-include='*' -cf "$work/image" . ;;
esac
mv -f "$work/image" "$out"
# An uncompressed image of the same name left by an older checkout is 3 GB nobody reads any more.
case "$out" in *.zst) rm -f "${out%.zst}" "${out%.zst}.stamp" ;; esac
echo "$digest $rootfs_digest" >"$stamp"
rm -rf "$tree" "$tree.stamp"
echo "built the $variant image in $(( $(date +%s) - start )) s: $out ($(du -m "$out" | cut -f1) MiB)"
