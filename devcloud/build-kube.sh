#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager and kube-scheduler from Debian's `kubernetes`
# source package with Debian's Go (docs/kubernetes.md). No registry ships a Kubernetes server
# here; the source package vendors every dependency, so the build is offline. The binaries are
# cached under ~/.cache/dlbench/kube/<source version>/bin (DLBENCH_KUBE_CACHE overrides the base)
# and rebuilt only when that version changes (about 3-6 minutes on 2 cores).
#
# The source is fetched with a private APT source list (deb-src), private lists and a private
# cache, so the host's APT configuration is not changed and an apt-get install running meanwhile
# (CI compiles the servers while apt installs the other packages, .ci/run) shares no file with it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
{ read -r version; read -r cache; } < <(python3 -c "import sys; sys.path.insert(0, '$here'); import k8s_control
print(k8s_control.KUBE_SOURCE_VERSION); print(k8s_control.cache_dir())")
# One build at a time (CI starts one in the background and joins it with another call): the
# second waits here, then finds the binaries.
mkdir -p "$cache"
exec 9>"$cache.lock"
flock 9
if [ -x "$cache/bin/kube-apiserver" ] && [ -x "$cache/bin/kube-controller-manager" ] && [ -x "$cache/bin/kube-scheduler" ]; then
  echo "kube: $version already built in $cache/bin"
  exit 0
fi
for tool in /usr/lib/go-1.19/bin/go rsync jq /usr/bin/etcd; do
  command -v "$tool" >/dev/null || { echo "kube: $tool missing (apt-get install golang-1.19-go rsync jq etcd-server)" >&2; exit 1; }
done
work="$(mktemp -d /tmp/dlbench-kube-build.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/lists/partial" "$work/src"
cat > "$work/apt/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
mkdir -p "$work/apt/cache/archives/partial"
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/apt" -o "Dir::State::Lists=$work/apt/lists"
          -o "Dir::Cache=$work/apt/cache"
          -o Debug::NoDropPrivs=1 -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update -qq
(cd "$work/src" && apt-get "${apt_opts[@]}" source --download-only -qq "kubernetes=$version")
(cd "$work/src" && dpkg-source -x --no-check kubernetes_*.dsc k8s >/dev/null)
cd "$work/src/k8s"
mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
export GOPATH="$PWD/.go" PATH="/usr/lib/go-1.19/bin:$PATH" CGO_ENABLED=0 HOME="$work/home" GOCACHE="$work/gocache"
mkdir -p "$HOME"
start=$(date +%s)
make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" >"$work/build.log" 2>&1 || {
  tail -30 "$work/build.log" >&2; exit 1; }
mkdir -p "$cache/bin.new"
cp _output/bin/kube-apiserver _output/bin/kube-controller-manager _output/bin/kube-scheduler "$cache/bin.new/"
rm -rf "$cache/bin" && mv "$cache/bin.new" "$cache/bin"
echo "kube: built $version in $(( $(date +%s) - start )) s into $cache/bin"
