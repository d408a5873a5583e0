"""What every part of the devcloud shares: its state directory and endpoints, running and
stopping processes (the signal sequence every part uses, the Kubernetes control planes' too),
waiting, the devcloud's PostgreSQL, the Ironic API client, network namespaces and the node
machines' sshd. The parts (devcloud.py's Ironic, novacloud, neutroncloud, magnumcloud, k8s_control)
import this module and nothing of each other upwards: devcloud.py -> novacloud -> neutroncloud ->
common, magnumcloud -> novacloud, every arrow down (before, the parts imported devcloud.py back
for these helpers: the house's one import circle). Standard library only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import machine  # devcloud/machine.py, next to this file

ROOT = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("DEVCLOUD_STATE", ROOT / ".devcloud"))
VENV = STATE / "venv"
LOGS = STATE / "logs"
RUN = STATE / "run"
PG_DIR = STATE / "pg"
PG_PORT = 54385
API_PORT = 6385
API = f"http://127.0.0.1:{API_PORT}"


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the ironic master forks its service worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGCONT (it may be frozen by a fault knob), SIGTERM, then SIGKILL after ``timeout``."""
    stop_group([pid, *children(pid)], timeout)


def stop_group(group: list[int], timeout: float = 10.0) -> None:
    """:func:`stop_pid` for several processes at once: all signalled together, one deadline."""
    for p in group:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in group) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in group:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def alive(pid: int) -> bool:
    """The process runs (a zombie has ended; our own ended child is reaped here)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


def log(msg: str) -> None:
    print(f"devcloud: {msg}", flush=True)


def sh(cmd: list[str], check: bool = True, quiet: bool = False, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure show what it said (the cause is nearly always in stderr)."""
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and res.returncode != 0:
        raise SystemExit(f"devcloud: command failed ({res.returncode}): {' '.join(cmd)}\n{res.stdout}{res.stderr}")
    if not quiet and res.returncode != 0:
        log(f"(ignored) {' '.join(cmd)}: {res.stderr.strip()}")
    return res


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"devcloud: timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def pid_alive(name: str, marker: str) -> int | None:
    """The pid recorded in run/<name>.pid if that process still runs and its command line
    contains ``marker`` (so a recycled pid is never mistaken for ours)."""
    try:
        pid = int((RUN / f"{name}.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError, IndexError):
        return None
    return pid if marker in cmdline else None


def pids_with(*markers: str) -> list[int]:
    """Every process whose command line contains one of ``markers``, and the monitor of each (Open
    vSwitch's ``--monitor`` parent retitles itself "ovs-vswitchd: monitoring pid N": its command
    line no longer holds the marker, so :func:`pid_alive` cannot find it by its pid file). One
    pass over /proc for all of them."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if not any(marker in cmdline for marker in markers):
                continue
            found.add(int(entry.name))
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            parent = Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace") if ppid > 1 else ""
        except (OSError, IndexError, ValueError):
            continue
        if f"monitoring pid {entry.name} " in parent or parent.endswith(f"monitoring pid {entry.name}"):
            found.add(ppid)
    return sorted(found)


def stop_services(named: list[tuple[str, str]], timeout: float = 10) -> None:
    """SIGTERM to every named service we started (``(name, marker)``, see :func:`pid_alive`) and
    its workers at once, SIGKILL to what is left after ``timeout``; their pid files go. A process of
    ours that its pid file no longer names (a retitled monitor, an earlier ``up``'s) is found by its
    marker (:func:`pids_with`): ``down`` leaves none of them running."""
    group = pids_with(*(marker for _, marker in named)) if named else []
    for name, marker in named:
        pid = pid_alive(name, marker)
        if pid:
            group += [pid, *children(pid)]
    stop_group(sorted(set(group)), timeout)
    for name, _ in named:
        (RUN / f"{name}.pid").unlink(missing_ok=True)


def exited(name: str, also: str = "") -> NoReturn:
    """Stop ``up``: the service we started as ``name`` died; the tail of its output says why."""
    out = LOGS / f"{name}.out"
    tail = out.read_text(errors="replace")[-3000:] if out.exists() else ""
    raise SystemExit(f"devcloud: {name} exited (see {out}{also}):\n{tail}")


def spawn(name: str, cmd: list[str]) -> int:
    """Start a long-running process detached from this one (own session, output in logs/)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    RUN.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"{name}.out", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=STATE)
    (RUN / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def pg_bin() -> Path:
    """The newest /usr/lib/postgresql/<v>/bin (Debian's layout); DEVCLOUD_PG_BIN overrides."""
    if os.environ.get("DEVCLOUD_PG_BIN"):
        return Path(os.environ["DEVCLOUD_PG_BIN"])
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not versions:
        raise SystemExit("devcloud: no PostgreSQL server binaries in /usr/lib/postgresql (apt-get install postgresql)")
    return versions[-1].parent


def as_postgres(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the ``postgres`` user when we are root."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def psql(sql: str, db: str = "postgres", check: bool = True) -> str:
    res = sh(as_postgres([str(pg_bin() / "psql"), "-h", "127.0.0.1", "-p", str(PG_PORT), "-U", "postgres",
                          "-d", db, "-tAXc", sql]), check=check, quiet=True)
    return res.stdout.strip()


def pg_running() -> bool:
    return sh(as_postgres([str(pg_bin() / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(PG_PORT)]),
              check=False, quiet=True).returncode == 0


def pg_up() -> bool:
    """Own cluster on 127.0.0.1:PG_PORT with an ``ironic`` DB; returns True if the DB is new."""
    data = PG_DIR / "data"
    if not (data / "PG_VERSION").exists():
        PG_DIR.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(PG_DIR, "postgres", "postgres")
        sh(as_postgres([str(pg_bin() / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                        "--no-sync", "-E", "UTF8"]))
    if not pg_running():
        sockets = PG_DIR / "sockets"
        sockets.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(sockets, "postgres", "postgres")
        # Throwaway data: no fsync; loopback only.
        opts = (f"-p {PG_PORT} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        sh(as_postgres([str(pg_bin() / "pg_ctl"), "-D", str(data), "-l", str(PG_DIR / "postgres.log"),
                        "-w", "-t", "30", "-o", opts, "start"]))
    if psql("SELECT 1 FROM pg_database WHERE datname = 'ironic'") == "1":
        return False
    psql("CREATE DATABASE ironic")
    return True


def pg_down(purge: bool) -> None:
    data = PG_DIR / "data"
    if (data / "PG_VERSION").exists() and pg_running():
        psql("DROP DATABASE IF EXISTS ironic WITH (FORCE)", check=False)
        sh(as_postgres([str(pg_bin() / "pg_ctl"), "-D", str(data), "-w", "-m", "fast", "stop"]), check=False)
    if purge:
        shutil.rmtree(PG_DIR, ignore_errors=True)


def api(method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    """One call to the Ironic API (latest microversion); returns the decoded JSON or None."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(API + path, data=data, method=method, headers={
        "X-OpenStack-Ironic-API-Version": "latest", "Content-Type": "application/json",
        "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def api_ready() -> bool:
    """The API answers and the conductor has registered fake-hardware (nodes can be enrolled)."""
    try:
        drivers = api("GET", "/v1/drivers", timeout=2)
    except (OSError, ValueError):
        return False
    return any(d.get("name") == "fake-hardware" for d in (drivers or {}).get("drivers", []))


def netns_list() -> list[str]:
    out = sh(["ip", "netns", "list"], quiet=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def link_exists(dev: str, ns: str | None = None) -> bool:
    cmd = ["ip"] + (["-n", ns] if ns else []) + ["link", "show", dev]
    return sh(cmd, check=False, quiet=True).returncode == 0


def ssh_down(i: int) -> None:
    """Knob: node i's own sshd stops (and stays stopped across (re)boots until ssh-up)."""
    RUN.mkdir(parents=True, exist_ok=True)
    machine.ssh_down_flag(STATE, i).touch()
    if wait_booted(i):
        machine.stop_sshd(STATE, i)


def ssh_up(i: int) -> None:
    machine.ssh_down_flag(STATE, i).unlink(missing_ok=True)
    if wait_booted(i) and not machine.sshd_pids(STATE, i):
        try:
            machine.start_sshd(STATE, i)
        except machine.MachineError:
            if machine.running(STATE, i):
                raise
            return  # the machine was switched off meanwhile (an undeploy): nothing to start
        wait_for(f"sshd of node {i}", lambda: bool(machine.sshd_pids(STATE, i)) or not machine.running(STATE, i),
                 timeout=10, interval=0.05)


def wait_booted(i: int, timeout: float = 20) -> bool:
    """True once machine i has booted (its init started sshd or decided not to, per the knob's
    flag as it was at boot); False when it does not run."""
    deadline = time.monotonic() + timeout
    while machine.running(STATE, i) and machine.booted(STATE, i) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return machine.booted(STATE, i) is not None


def machine_status(i: int) -> dict[str, str]:
    """machine up/down, image booted, sshd, dockerd of node i (from the host's side)."""
    info = machine.machine_info(STATE, i) or {}
    if not machine.running(STATE, i):
        return {"machine": "down", "image": info.get("image", "-"), "sshd": "-", "dockerd": "-"}
    if machine.booted(STATE, i) is None:
        return {"machine": "booting", "image": info.get("image", "?"), "sshd": "-", "dockerd": "-"}
    sshd = "up" if machine.sshd_pids(STATE, i) else ("off" if machine.ssh_down_flag(STATE, i).exists() else "DOWN")
    if not info.get("docker"):
        dockerd = "-"
    elif machine.dockerd_pid(STATE, i) is None:
        dockerd = "DOWN"
    else:
        dockerd = "up" if machine.docker_ready(STATE, i) else "starting"
    return {"machine": "up", "image": info.get("image", "?"), "sshd": sshd, "dockerd": dockerd}
