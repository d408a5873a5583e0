#!/usr/bin/env bash
# Build a local Debian base image with debootstrap + `docker import`, for machines that reach
# Debian's package mirror but no container registry. Users with a registry build FROM the
# official image instead (Dockerfile's BASE_IMAGE default) and never need this.
#
#   docker/build-base.sh [TAG]     (default TAG: dlbench-base:bookworm-2; bump the suffix when the package list changes)
#
# The benchmark tools are included here so the Dockerfile needs no apt inside the build.
set -euo pipefail
tag=${1:-dlbench-base:bookworm-2}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}
mirror=${mirror:-http://deb.debian.org/debian}
packages=python3,python3-venv,python3-pip,ca-certificates,procps,iproute2,fio,ioping,iperf3,hpcc,openmpi-bin,strace,coreutils,gcc,libc6-dev
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag exists"; exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
root=$(mktemp -d /tmp/dlbench-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# Slim the image: no apt lists or caches, no docs.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/usr/share/doc/* "$root"/usr/share/man/*
tar -C "$root" -c . | docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
echo "built $tag in $(( $(date +%s) - start )) s"
