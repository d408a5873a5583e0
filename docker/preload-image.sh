#!/usr/bin/env bash
# Pre-load a Docker image into a root filesystem's Docker store (ROOT/var/lib/docker, overlay2), as
# a machine deployed from that root then finds it: a private dockerd of this host on that data root,
# fed by `docker save` from this host's engine. Used by docker/build-node-image.sh (the node image
# carries the workload image; the VM image inherits it with the rest of the node image's root).
#
#   docker/preload-image.sh ROOT IMAGE WORKDIR LOG
#
# WORKDIR holds the private dockerd's socket, exec root and pid file (created, emptied after).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 ROOT IMAGE WORKDIR LOG" >&2; exit 2; }
root=$1; image=$2; work=$3; log=$4
command -v dockerd >/dev/null || { echo "no dockerd on this host (make docker-up installs it)" >&2; exit 1; }
mkdir -p "$root/var/lib/docker" "$work/exec"
# Its own network namespace and no network store from the image: a dockerd started with
# --bridge=none deletes a stored "bridge" network, i.e. the host's docker0, when it shares the
# host's namespace (it only talks to the CLI through its unix socket).
rm -rf "$root/var/lib/docker/network"
unshare --net dockerd --data-root "$root/var/lib/docker" --exec-root "$work/exec" --pidfile "$work/dockerd.pid" \
  -H "unix://$work/docker.sock" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
  --storage-driver=overlay2 >>"$log" 2>&1 &
pid=$!
stop() {
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
}
trap stop EXIT
for _ in $(seq 1 60); do docker -H "unix://$work/docker.sock" info >/dev/null 2>&1 && break; sleep 1; done
docker save "$image" | docker -H "unix://$work/docker.sock" load >>"$log" 2>&1
stop; trap - EXIT; wait "$pid" 2>/dev/null || true
# Only the image: no network store, runtimes, temporary files, engine identity or databases of
# this build's dockerd (each machine's engine makes its own).
rm -rf "$root/var/lib/docker/network" "$root/var/lib/docker/runtimes" "$root/var/lib/docker/tmp" \
       "$root/var/lib/docker/engine-id" "$root/var/lib/docker/volumes" "$root/var/lib/docker/buildkit" \
       "$root/var/lib/docker/containerd" "$root/var/lib/docker/swarm" "$root/var/lib/docker/plugins" \
       "$root/var/lib/docker/containers" "$work/exec" "$work/docker.sock" "$work/dockerd.pid"
