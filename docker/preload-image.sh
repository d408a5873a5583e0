#!/usr/bin/env bash
# Pre-load a Docker image into a root filesystem's Docker store (ROOT/var/lib/docker, overlay2), as
# a machine deployed from that root then finds it: a private dockerd of this host on that data root,
# fed by `docker save` from this host's engine. Used by docker/build-node-image.sh (the node image
# carries the workload image; the VM image inherits it with the rest of the node image's root).
#
#   docker/preload-image.sh ROOT IMAGE WORKDIR LOG
#
# WORKDIR holds the private containerd's store (created, removed after); the sockets, exec root and
# pid files live in a short directory under /tmp (a unix socket's path is limited to 107 bytes, and
# a checkout's path can be long).
#
# Why its own containerd, awaited here: a dockerd that starts its own gives it a fixed 15 s, and on
# a loaded CI machine (the image builds, the Kubernetes compile and the venvs side by side) that
# containerd was not answering in time ("timeout waiting for containerd to start"). Why a private
# mount and network namespace: a dockerd bind-mounts its data root onto itself (and containerd
# probes overlayfs with a mount); in their own mount namespace every such mount ends with them, so
# nothing is left mounted on the image's tree even when they fail; in its own network namespace a
# dockerd cannot touch the host's docker0 (it only talks to the CLI through its unix socket).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 ROOT IMAGE WORKDIR LOG" >&2; exit 2; }
root=$1; image=$2; work=$3; log=$4
for tool in dockerd containerd unshare; do
  command -v "$tool" >/dev/null || { echo "no $tool on this host (make prereqs installs docker.io)" >&2; exit 1; }
done
# A bound for each daemon's start: generous, because the failure this guards against is a slow host.
start_timeout=${DLBENCH_PRELOAD_START_TIMEOUT:-300}
mkdir -p "$root/var/lib/docker" "$work"
run=$(mktemp -d /tmp/dlbench-preload.XXXXXX)
# No network store from the image: a dockerd started with --bridge=none deletes a stored "bridge".
rm -rf "$root/var/lib/docker/network"
cat >"$run/containerd.toml" <<EOF
version = 2
root = "$work/containerd"
state = "$run/containerd-state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$run/containerd.sock"
EOF
export run root log start_timeout
unshare --net --mount --propagation private bash -c '
  containerd --config "$run/containerd.toml" >>"$log" 2>&1 &
  echo $! >"$run/containerd.pid"
  for _ in $(seq 1 "$start_timeout"); do
    [ -S "$run/containerd.sock" ] && break
    kill -0 "$(cat "$run/containerd.pid")" 2>/dev/null || { echo "the private containerd exited" >>"$log"; exit 1; }
    sleep 1
  done
  [ -S "$run/containerd.sock" ] || { echo "the private containerd did not start in $start_timeout s" >>"$log"; exit 1; }
  exec dockerd --containerd "$run/containerd.sock" --data-root "$root/var/lib/docker" \
    --exec-root "$run/exec" --pidfile "$run/dockerd.pid" -H "unix://$run/docker.sock" \
    --bridge=none --iptables=false --ip6tables=false --ip-masq=false --storage-driver=overlay2 >>"$log" 2>&1
' &
pid=$!
# Stop dockerd first (it flushes its store), then containerd; each gets a minute to exit cleanly.
stop_pid() {
  local p=$1
  kill -0 "$p" 2>/dev/null || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || return 0; sleep 1; done
  kill -9 "$p" 2>/dev/null || true
}
stop() {
  stop_pid "$pid"; wait "$pid" 2>/dev/null || true
  [ -f "$run/containerd.pid" ] && stop_pid "$(cat "$run/containerd.pid")"
  rm -rf "$run"
}
trap stop EXIT
private=(docker -H "unix://$run/docker.sock")
ready=0
for _ in $(seq 1 "$start_timeout"); do
  "${private[@]}" info >/dev/null 2>&1 && { ready=1; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 1
done
[ "$ready" = 1 ] || { echo "the private dockerd for the pre-load did not start (its log: $log)" >&2; exit 1; }
docker save "$image" | "${private[@]}" load >>"$log" 2>&1
"${private[@]}" image inspect "$image" >/dev/null ||
  { echo "$image is not in the pre-loaded store after the load (log: $log)" >&2; exit 1; }
stop; trap - EXIT
# Only the image: no network store, runtimes, temporary files, engine identity or databases of
# this build's dockerd (each machine's engine makes its own).
rm -rf "$root/var/lib/docker/network" "$root/var/lib/docker/runtimes" "$root/var/lib/docker/tmp" \
       "$root/var/lib/docker/engine-id" "$root/var/lib/docker/volumes" "$root/var/lib/docker/buildkit" \
       "$root/var/lib/docker/containerd" "$root/var/lib/docker/swarm" "$root/var/lib/docker/plugins" \
       "$root/var/lib/docker/containers" "$work"
