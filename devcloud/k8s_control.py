"""A real Kubernetes control plane for the devcloud (docs/kubernetes.md): etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, plus our node agent (``k8s_node.py``) in the kubelet's
place.

The three Kubernetes servers are built from Debian's ``kubernetes`` source package (1.20.2, every
dependency vendored) with Debian's Go by ``devcloud/build-kube.sh``, cached under
``~/.cache/dlbench/kube/<source version>/`` (no registry ships a Kubernetes server binary); etcd is
Debian's ``etcd-server``. Everything above the node agent is the real thing: admission, RBAC, the
scheduler's decisions (requests, affinity, its own ``FailedScheduling`` events), the Job and
namespace controllers, garbage collection, watches.

One cluster = one etcd (its own data directory and ports), one apiserver on ``127.0.0.1:PORT``
(HTTPS, client certificates), a controller manager and a scheduler (both without serving ports,
so several clusters run side by side), and one node agent for all of the cluster's nodes.

Certificates: an internal CA per cluster signs the components' client certificates, the node
agent's serving certificate and (without ``tls``) the apiserver's. With ``tls`` (the Magnum
devcloud driver: a serving certificate signed by the cluster's Magnum CA), the apiserver serves
that certificate and also accepts client certificates of ``tls["client_ca"]`` (what ``openstack
coe cluster config`` hands out, ``O=system:masters``).

Start/stop from Python: :func:`start` returns a :class:`ControlPlane` (its ``admin_kubeconfig``
is a cluster-admin kubeconfig), :func:`stop` ends it and removes the pods' containers. Stdlib and
the ``openssl`` CLI only: it imports nothing of dlbench.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common  # devcloud/common.py, next to this file

KUBE_SOURCE_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"
"""Debian's ``kubernetes`` source package the servers are built from (the cache key)."""
KUBE_VERSION = "v1.20.2"
FEATURE_GATES = "TTLAfterFinished=true"
"""``Job.spec.ttlSecondsAfterFinished`` is alpha in 1.20 (GA in 1.23): without the gate the
apiserver drops the field the executor sets."""
SERVICE_CIDR = "10.96.0.0/24"
BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ETCD = "/usr/bin/etcd"


def cache_dir() -> Path:
    base = os.environ.get("DLBENCH_KUBE_CACHE") or str(Path.home() / ".cache" / "dlbench" / "kube")
    return Path(base) / KUBE_SOURCE_VERSION


def binaries_present() -> bool:
    return all((cache_dir() / "bin" / b).is_file() for b in BINARIES) and Path(ETCD).is_file()


BUILD_WAIT_S = 1800.0
"""How long a caller waits for a ``make kube`` in progress (a fresh build takes about 4 minutes of
both cores when alone, 6-13 beside other work)."""


def build_lock() -> Path:
    """The lock ``devcloud/build-kube.sh`` holds while it builds (``<cache>/<version>.lock``)."""
    return cache_dir().with_name(cache_dir().name + ".lock")


def ready(timeout: float = BUILD_WAIT_S) -> bool:
    """Whether the servers can start, after waiting (bounded) for a build in progress to end.

    Why wait here: a build may be running beside its first user (CI starts it in the background,
    .ci/run; a developer runs ``make kube`` in another shell), and binaries a minute away are not
    missing. Raises ``RuntimeError`` naming the lock when the build has not ended within
    ``timeout``."""
    if binaries_present():
        return True
    lock = build_lock()
    if not lock.exists():  # never built here: nothing to wait for
        return False
    fd = os.open(lock, os.O_RDONLY)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # the build's exclusive lock is gone
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Kubernetes servers' build (holding {lock}) did not end within "
                                       f"{timeout:.0f} s: see its log (CI: build/kube-build.log)") from None
                time.sleep(2)
    finally:
        os.close(fd)
    return binaries_present()


def missing_reason() -> str:
    if not Path(ETCD).is_file():
        return "etcd is not installed (apt-get install etcd-server)"
    return (f"the Kubernetes servers {KUBE_VERSION} are not built in {cache_dir() / 'bin'} "
            "(run `make kube`: devcloud/build-kube.sh, about 6 minutes on 2 cores)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- certificates ----------------------------------------------------------------------------------

def _openssl(*argv: str, cwd: Path) -> None:
    out = subprocess.run(["openssl", *argv], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"openssl {argv[0]} failed: {out.stderr.strip()[-400:]}")


def _issue(pki: Path, name: str, subject: str, *, server: bool = False, sans: str = "") -> None:
    """``name.crt``/``name.key`` signed by the cluster's internal CA (``ca.crt``/``ca.key``)."""
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=pki)
    ext = pki / f"{name}.ext"
    usage = "serverAuth" if server else "clientAuth"
    ext.write_text(f"keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={usage}\n"
                   + (f"subjectAltName={sans}\n" if sans else ""))
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "30", "-sha256", "-extfile", ext.name, "-out", f"{name}.crt", cwd=pki)
    os.chmod(pki / f"{name}.key", 0o600)


def make_pki(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "30", "-subj", "/CN=dlbench-devcloud-kubernetes-ca", cwd=pki)
    os.chmod(pki / "ca.key", 0o600)
    _issue(pki, "apiserver", "/CN=kube-apiserver", server=True,
           sans="DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
                "IP:127.0.0.1,IP:10.96.0.1")
    _issue(pki, "apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    _issue(pki, "controller-manager", "/CN=system:kube-controller-manager")
    _issue(pki, "scheduler", "/CN=system:kube-scheduler")
    # One agent serves every node of the cluster, so it cannot be one system:node:<name> identity
    # (the Node authorizer's); it is bound to the system:node ClusterRole for all nodes instead.
    _issue(pki, "node-agent", "/O=system:nodes/CN=dlbench-node-agent")
    _issue(pki, "node-agent-serving", "/CN=dlbench-node-agent", server=True, sans="DNS:localhost,IP:127.0.0.1")
    _issue(pki, "admin", "/O=system:masters/CN=dlbench-admin")
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path, user: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "devcloud",
        "clusters": [{"name": "devcloud", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "devcloud", "context": {"cluster": "devcloud", "user": user}}]}, indent=1))
    os.chmod(path, 0o600)
    return path


# -- the processes ---------------------------------------------------------------------------------

@dataclass
class ControlPlane:
    """One running cluster: its processes (pids), ports and kubeconfigs."""

    state_dir: Path
    port: int
    admin_kubeconfig: Path
    ca: Path
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {"state_dir": str(self.state_dir), "port": self.port, "admin_kubeconfig": str(self.admin_kubeconfig),
                "ca": str(self.ca), "pids": self.pids}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ControlPlane:
        return cls(Path(data["state_dir"]), int(data["port"]), Path(data["admin_kubeconfig"]), Path(data["ca"]),
                   {k: int(v) for k, v in data["pids"].items()})


def _spawn(name: str, argv: list[str], logs: Path) -> int:
    log = (logs / f"{name}.log").open("ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    log.close()
    return proc.pid


def _wait(what: str, ready: Any, pids: dict[str, int], logs: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, pid in pids.items():
            if not common.alive(pid):
                tail = (logs / f"{name}.log").read_text(errors="replace")[-1500:] if (logs / f"{name}.log").exists() \
                    else ""
                raise RuntimeError(f"{name} exited while waiting for {what}; its log ends:\n{tail}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready within {timeout:.0f} s (logs in {logs})")


def _healthy(port: int, ctx: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _client_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def _apply(port: int, ctx: ssl.SSLContext, path: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, context=ctx, timeout=10).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise RuntimeError(f"POST {path}: {exc.code} {exc.read()[:300]!r}") from None


def _schedulable(port: int, ctx: ssl.SSLContext) -> set[str]:
    """Nodes that are Ready and carry no taint (the node lifecycle controller taints a new node
    ``not-ready`` until it has seen it Ready: a pod created before that waits a scheduling cycle)."""
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/api/v1/nodes", context=ctx, timeout=10) as resp:
        items = json.loads(resp.read())["items"]
    return {n["metadata"]["name"] for n in items if not (n.get("spec") or {}).get("taints") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or [])}


def start(state_dir: str | Path, nodes: list[dict[str, Any]], port: int | None = None,
          tls: dict[str, str] | None = None, timeout: float = 90) -> ControlPlane:
    """Start a cluster whose nodes are ``nodes`` (the node agent's specs, see ``k8s_node.py``);
    returns once the apiserver is ready and every node has registered Ready."""
    if not ready():
        raise RuntimeError(missing_reason())
    state = Path(state_dir)
    if state.exists():
        shutil.rmtree(state)
    pki, logs = state / "pki", state / "logs"
    logs.mkdir(parents=True)
    make_pki(pki)
    port = port or free_port()
    serving_cert, serving_key, serving_ca = pki / "apiserver.crt", pki / "apiserver.key", pki / "ca.crt"
    client_ca = pki / "client-ca.crt"
    client_ca.write_text((pki / "ca.crt").read_text())
    if tls:
        serving_cert, serving_key, serving_ca = Path(tls["cert"]), Path(tls["key"]), Path(tls["client_ca"])
        client_ca.write_text((pki / "ca.crt").read_text() + Path(tls["client_ca"]).read_text())
    server = f"https://127.0.0.1:{port}"
    kubeconfigs = {name: write_kubeconfig(state / f"{name}.kubeconfig", server, serving_ca, pki / f"{name}.crt",
                                          pki / f"{name}.key", name)
                   for name in ("admin", "controller-manager", "scheduler", "node-agent")}
    bin_dir = cache_dir() / "bin"
    etcd_port, etcd_peer = free_port(), free_port()
    pids: dict[str, int] = {}
    plane = ControlPlane(state, port, kubeconfigs["admin"], serving_ca, pids)
    try:
        pids["etcd"] = _spawn("etcd", [
            ETCD, "--name", "devcloud", "--data-dir", str(state / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"devcloud=http://127.0.0.1:{etcd_peer}", "--unsafe-no-fsync"], logs)
        pids["kube-apiserver"] = _spawn("kube-apiserver", [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
            "--endpoint-reconciler-type=none", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", f"--client-ca-file={client_ca}",
            f"--tls-cert-file={serving_cert}", f"--tls-private-key-file={serving_key}",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={pki / 'ca.crt'}",
            # The node agent runs on this controller for every node: the apiserver reaches its
            # kubelet API at the node's InternalDNS address (localhost), never at the node's IP.
            "--kubelet-preferred-address-types=InternalDNS", f"--feature-gates={FEATURE_GATES}",
            "--allow-privileged=true", "--profiling=false", "--v=1"], logs)
        admin_ctx = _client_context(serving_ca, pki / "admin.crt", pki / "admin.key")
        _wait("kube-apiserver", lambda: _healthy(port, admin_ctx), pids, logs, timeout)
        # The node agent's identity may act for every node of this cluster (see make_pki).
        _apply(port, admin_ctx, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": "dlbench-node-agent"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dlbench-node-agent"}]})
        pids["kube-controller-manager"] = _spawn("kube-controller-manager", [
            str(bin_dir / "kube-controller-manager"), f"--kubeconfig={kubeconfigs['controller-manager']}",
            f"--authentication-kubeconfig={kubeconfigs['controller-manager']}",
            f"--authorization-kubeconfig={kubeconfigs['controller-manager']}",
            "--port=0", "--secure-port=0", "--leader-elect=false", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={serving_ca}",
            f"--feature-gates={FEATURE_GATES}", "--controllers=*,-nodeipam,-cloud-node-lifecycle,-route,-service",
            "--v=1"], logs)
        pids["kube-scheduler"] = _spawn("kube-scheduler", [
            str(bin_dir / "kube-scheduler"), f"--kubeconfig={kubeconfigs['scheduler']}",
            f"--authentication-kubeconfig={kubeconfigs['scheduler']}",
            f"--authorization-kubeconfig={kubeconfigs['scheduler']}",
            "--port=0", "--secure-port=0", "--leader-elect=false", "--v=1"], logs)
        (state / "nodes.json").write_text(json.dumps(nodes, indent=1))
        agent_port = free_port()
        pids["node-agent"] = _spawn("node-agent", [
            sys.executable, str(Path(__file__).with_name("k8s_node.py")), "--kubeconfig",
            str(kubeconfigs["node-agent"]), "--nodes", str(state / "nodes.json"), "--listen", f"127.0.0.1:{agent_port}",
            "--tls-cert", str(pki / "node-agent-serving.crt"), "--tls-key", str(pki / "node-agent-serving.key"),
            "--client-ca", str(pki / "ca.crt"), "--ready-file", str(state / "agent-ready")], logs)
        (state / "plane.json").write_text(json.dumps(plane.to_json(), indent=1))
        _wait("the node agent", lambda: (state / "agent-ready").exists(), pids, logs, timeout)
        names = {n["name"] for n in nodes}
        _wait("the nodes Ready and untainted", lambda: _schedulable(port, admin_ctx) >= names, pids, logs, timeout)
        return plane
    except BaseException:
        stop(plane)
        raise


def _ours(pid: int, plane: ControlPlane) -> bool:
    """``pid`` is still one of this plane's processes: every one of them names a file of its state
    directory on its command line (a plane stopped from its state file long after its start must
    never signal a recycled pid)."""
    try:
        return str(plane.state_dir) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def stop(plane: ControlPlane, timeout: float = 60) -> None:
    """The node agent first (it removes its pods' containers), then the servers, then etcd."""
    for name in ("node-agent", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
        pid = plane.pids.get(name)
        if pid is not None and common.alive(pid) and _ours(pid, plane):
            common.stop_group([pid], timeout if name == "node-agent" else 15)
            common.alive(pid)  # reaps it when it is our child (the conductor's, a test's): no zombie left
    shutil.rmtree(plane.state_dir / "etcd", ignore_errors=True)


def sweep() -> list[int]:
    """Kill every control-plane process of the devcloud still running (a test or conductor that
    died before its stop): ``devcloud down`` calls it. Matched by command line: our servers'
    cached binaries, the node agent, an etcd of ours (``--name devcloud``)."""
    marks = (str(cache_dir() / "bin") + "/", str(Path(__file__).with_name("k8s_node.py")))
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv)
        if any(m in line for m in marks) or (argv[0] == ETCD.encode() and "--name devcloud" in line):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


def stop_from_state(state_dir: str | Path) -> None:
    """Stop a cluster started by another process (the Magnum conductor after a restart)."""
    path = Path(state_dir) / "plane.json"
    if path.exists():
        stop(ControlPlane.from_json(json.loads(path.read_text())))
