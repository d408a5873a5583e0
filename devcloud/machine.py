"""devcloud machines: each node is a machine that shares no files with this host (docs/devcloud.md).

A machine is the node's network namespace (``devcloud-node-<i>``, made by devcloud.py up) plus
its own mount, UTS, IPC, PID and cgroup namespaces, whose root is an overlayfs:

    lower  .devcloud/images/rootfs/<image>-<key>/   the image tarball, extracted once, read-only
    upper  .devcloud/nodes/<i>/disk/{upper,work}    the node's "disk": wiped on undeploy

with its own /proc, /sys, /dev (a tmpfs with a few device nodes + its own devpts), /run and
/tmp (tmpfs), cgroup hierarchies rooted at its own cgroup, and, when the image has Docker, its
own dockerd whose data root is .devcloud/nodes/<i>/docker bind-mounted at /var/lib/docker.
PID 1 is devcloud/nodeinit.py run by the image's python3 (the image's cloud-init + init).

Every mount lives in the machine's private mount namespace, so nothing is left mounted on the
host when the machine stops (its PID 1 exits: the kernel kills every process in it).

Standard library only: used by devcloud.py (host python3) and by the node agent (devcloud venv),
and run as ``python3 machine.py launch|stage2 ...`` to start a machine.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
NODE_PREFIX = "devcloud-node-"
NODE_IMAGE = ROOT / "build" / "node-image" / "dlbench-node.tar.zst"
"""The project's node image (``make node-image``, docs/node-image.md)."""
DEFAULT_IMAGE = "stock"
DOCKER_SUBNET = "198.19.{i}.1/24"
"""The node dockerd's bridge (--bip), inside the benchmarking range 198.18.0.0/15."""


def log(msg: str) -> None:
    print(f"devcloud: {msg}", flush=True)


class MachineError(RuntimeError):
    pass


# --- images ----------------------------------------------------------------------------------

def images(state: Path) -> dict[str, Path]:
    """The devcloud's images: ``<state>/images/<name>.tar`` (``stock`` is built by
    ``make devcloud-images``) and the project's node image ``build/node-image/dlbench-node.tar.zst``."""
    found = {p.stem: p for p in sorted((state / "images").glob("*.tar"))}
    found["dlbench-node"] = NODE_IMAGE
    found.setdefault(DEFAULT_IMAGE, state / "images" / f"{DEFAULT_IMAGE}.tar")
    return found


def resolve_image(state: Path, image_source: Any) -> tuple[str, Path]:
    """(name, tarball) booted for an ``instance_info.image_source``.

    A ``file://`` URL naming one of :func:`images` (after resolving symlinks) boots that image;
    anything else (another file, a Glance name, an http URL) boots ``stock``, as a cloud would
    boot its generic image: the devcloud has no image service to fetch other images from.
    """
    known = images(state)
    if isinstance(image_source, str) and image_source.startswith("file://"):
        path = Path(urllib.parse.unquote(urllib.parse.urlparse(image_source).path))
        try:
            real = path.resolve()
        except OSError:
            real = path
        for name, tar in known.items():
            try:
                if tar.exists() and tar.resolve() == real:
                    return name, tar
            except OSError:
                continue
    return DEFAULT_IMAGE, known[DEFAULT_IMAGE]


def rootfs_dir(state: Path) -> Path:
    return state / "images" / "rootfs"


def lower_for(state: Path, name: str, tar: Path) -> Path:
    """Where ``tar`` is (or will be) extracted: keyed by its path, mtime and size."""
    st = tar.stat()
    key = hashlib.sha256(f"{tar.resolve()}:{st.st_mtime_ns}:{st.st_size}".encode()).hexdigest()[:12]
    return rootfs_dir(state) / f"{name}-{key}"


def extract(state: Path, name: str, tar: Path) -> tuple[Path, float]:
    """The extracted root of an image (extracting it on first use); returns (dir, seconds spent)."""
    if not tar.exists():
        hint = "make node-image" if name == "dlbench-node" else "make devcloud-images"
        raise MachineError(f"image {name} has no tarball {tar} (build it: `{hint}`)")
    lower = lower_for(state, name, tar)
    if (lower / ".devcloud-extracted").exists():
        return lower, 0.0
    rootfs_dir(state).mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(rootfs_dir(state) / f".lock-{name}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one extraction per image at a time (agent threads, make)
        if (lower / ".devcloud-extracted").exists():
            return lower, time.monotonic() - started
        tmp = lower.with_name(f".extract-{lower.name}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        res = subprocess.run(["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-xpf", str(tar),
                              "-C", str(tmp)], capture_output=True, text=True)
        if res.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise MachineError(f"extracting {tar} failed: {res.stderr.strip()[-500:]}")
        (tmp / ".devcloud-extracted").write_text(json.dumps({"tar": str(tar), "at": time.time()}) + "\n")
        shutil.rmtree(lower, ignore_errors=True)
        tmp.rename(lower)
    elapsed = time.monotonic() - started
    gc_rootfs(state)
    return lower, elapsed


def gc_rootfs(state: Path) -> None:
    """Drop extracted roots that are neither current for their image nor used by a node's disk."""
    current = set()
    for name, tar in images(state).items():
        if tar.exists():
            current.add(lower_for(state, name, tar).name)
    for info in (state / "nodes").glob("*/machine.json"):
        try:
            current.add(Path(json.loads(info.read_text())["lower"]).name)
        except (OSError, ValueError, KeyError):
            continue
    for d in rootfs_dir(state).iterdir() if rootfs_dir(state).exists() else []:
        if d.is_dir() and not d.name.startswith(".") and d.name not in current:
            shutil.rmtree(d, ignore_errors=True)


# --- per-node layout ---------------------------------------------------------------------------

def node_dir(state: Path, i: int) -> Path:
    return state / "nodes" / str(i)


def pidfile(state: Path, i: int) -> Path:
    return state / "run" / f"machine-{i}.pid"


def ssh_down_flag(state: Path, i: int) -> Path:
    """Set by the ``ssh-down`` knob: the machine keeps (or boots with) its sshd stopped."""
    return state / "run" / f"ssh-down-{i}"


def machine_info(state: Path, i: int) -> dict[str, Any] | None:
    try:
        return json.loads((node_dir(state, i) / "machine.json").read_text())
    except (OSError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def launcher_pid(state: Path, i: int) -> int | None:
    """The machine's launcher (the ``unshare`` waiting for its PID 1), if it runs."""
    try:
        pid = int(pidfile(state, i).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if f"machine.py stage2 --state {state} --node {i} " in _cmdline(pid) + " " else None


def init_pid(state: Path, i: int) -> int | None:
    """Host pid of the machine's PID 1 (its nodeinit.py), if the machine runs."""
    launcher = launcher_pid(state, i)
    if launcher is None:
        return None
    for child in _children(launcher):
        return child
    return None


def running(state: Path, i: int) -> bool:
    return launcher_pid(state, i) is not None


def inside(pid: int, path: str) -> Path:
    """A path of the machine's filesystem as the host reaches it (through its PID 1's root)."""
    return Path(f"/proc/{pid}/root") / path.lstrip("/")


def booted(state: Path, i: int) -> dict[str, Any] | None:
    """The machine's /run/devcloud/booted.json (written by its init once its services started)."""
    pid = init_pid(state, i)
    if pid is None:
        return None
    try:
        return json.loads(inside(pid, "/run/devcloud/booted.json").read_text())
    except (OSError, ValueError):
        return None


def machine_processes(state: Path, i: int) -> list[tuple[int, int, str]]:
    """(host pid, host ppid, comm) of every process in the machine's PID namespace."""
    pid = init_pid(state, i)
    if pid is None:
        return []
    try:
        ns = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "pid") != ns:
                continue
            stat = (entry / "stat").read_text()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        found.append((int(entry.name), ppid, comm))
    return found


def sshd_pids(state: Path, i: int) -> list[int]:
    """The machine's listening sshd (child of its PID 1) and its per-connection children."""
    procs = machine_processes(state, i)
    init = init_pid(state, i)
    listeners = {p for p, pp, comm in procs if comm == "sshd" and pp == init}
    return sorted(listeners | {p for p, pp, comm in procs if comm == "sshd" and pp in listeners})


def dockerd_pid(state: Path, i: int) -> int | None:
    for p, _, comm in machine_processes(state, i):
        if comm == "dockerd":
            return p
    return None


def docker_ready(state: Path, i: int) -> bool:
    """The machine's engine answers on its /run/docker.sock (reached through the machine's root)."""
    pid = init_pid(state, i)
    if pid is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(str(inside(pid, "/run/docker.sock")))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in s.recv(64)
    except OSError:
        return False


# --- cgroups -----------------------------------------------------------------------------------

def cgroup_mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, options) of this host's cgroup hierarchies (v1 controllers, named
    hierarchies, the v2 unified one)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        fstype, super_opts = fields[sep + 1], fields[sep + 3]
        if fstype in ("cgroup", "cgroup2"):
            opts = ",".join(o for o in super_opts.split(",") if o not in ("rw", "ro"))
            found.append((fields[4], fstype, opts))
    return found


def own_cgroups() -> dict[str, str]:
    """hierarchy key (controllers, ``name=...`` or ``""`` for v2) -> this process's cgroup path."""
    out = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        out[controllers] = path
    return out


def _hierarchy_key(fstype: str, opts: str) -> str:
    if fstype == "cgroup2":
        return ""
    return ",".join(o for o in opts.split(",") if o in CONTROLLERS or o.startswith("name="))


CONTROLLERS = {"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "net_cls", "blkio", "perf_event",
               "net_prio", "hugetlb", "pids", "rdma", "misc"}


def cgroup_record(state: Path, i: int) -> Path:
    return state / "run" / f"machine-{i}.cgroups"


def cgroups_create(state: Path, i: int) -> list[dict[str, str]]:
    """``devcloud-node-<i>`` under this process's cgroup in every hierarchy (so the machine stays
    inside whatever accounts for the devcloud), recorded (with each hierarchy's mount, which the
    machine mounts again inside its cgroup namespace) for stage2 and for removal."""
    mine = own_cgroups()
    made = []
    for mnt, fstype, opts in cgroup_mounts():
        rel = mine.get(_hierarchy_key(fstype, opts))
        if rel is None or not mnt.startswith("/sys/fs/cgroup"):
            continue
        parent = Path(mnt) / rel.lstrip("/")
        group = parent / f"{NODE_PREFIX}{i}"
        group.mkdir(exist_ok=True)
        if "cpuset" in opts.split(","):  # a new cpuset has no cpus/mems until given its parent's
            for f in ("cpuset.cpus", "cpuset.mems"):
                (group / f).write_text((parent / f).read_text())
        made.append({"group": str(group), "mount": mnt, "fstype": fstype, "options": opts})
    cgroup_record(state, i).write_text(json.dumps(made, indent=1) + "\n")
    return made


def _recorded_cgroups(state: Path, i: int) -> list[dict[str, str]]:
    try:
        return json.loads(cgroup_record(state, i).read_text())
    except (OSError, ValueError):
        return []


def cgroups_remove(state: Path, i: int) -> None:
    """Remove the machine's cgroups (and the ones its dockerd made below them), deepest first."""
    for group in (Path(g["group"]) for g in _recorded_cgroups(state, i)):
        if not group.name.startswith(NODE_PREFIX) or not group.exists():
            continue
        subdirs = sorted((d for d in group.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True)
        for d in [*subdirs, group]:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # tasks still exiting
    cgroup_record(state, i).unlink(missing_ok=True)


# --- start / stop ------------------------------------------------------------------------------

def dockerd_args(i: int) -> list[str]:
    """The node's own engine: own data root (the host's ext4 via a bind mount: overlay2 cannot
    use an overlayfs upper), own containerd and sockets under the node's /run, cgroupfs below the
    machine's cgroup namespace root, a bridge in the benchmarking range, iptables in the node's
    network namespace only."""
    return ["--data-root=/var/lib/docker", "--exec-root=/run/docker", "--pidfile=/run/docker.pid",
            "--host=unix:///run/docker.sock", "--exec-opt=native.cgroupdriver=cgroupfs",
            "--cgroup-parent=/docker", f"--bip={DOCKER_SUBNET.format(i=i)}", "--iptables=true",
            "--storage-driver=overlay2", "--log-level=warn"]


def boot(state: Path, i: int, *, image: str, tar: Path, hostname: str, public_keys: list[str],
         meta_data: dict[str, Any], user_data: bytes | None, mark: dict[str, Any], fresh: bool,
         netns: str | None = None) -> dict[str, Any]:
    """Start machine i from ``tar`` (a fresh disk unless ``fresh`` is False: a reboot).

    Returns machine.json (what booted, timings). Raises MachineError when it cannot start.
    """
    started = time.monotonic()
    if running(state, i):
        stop(state, i, wipe=fresh)
    elif fresh:
        wipe_disk(state, i)
    nd = node_dir(state, i)
    previous = None if fresh else machine_info(state, i)
    if previous and Path(previous["lower"]).is_dir():  # a reboot keeps the root its disk was made on
        lower, extract_s, image, tar = Path(previous["lower"]), 0.0, previous["image"], Path(previous["image_tar"])
    else:
        lower, extract_s = extract(state, image, tar)
    for d in ("disk/upper", "disk/work", "root", "docker"):
        (nd / d).mkdir(parents=True, exist_ok=True)
    has_docker = any((lower / d / "dockerd").exists() for d in ("usr/sbin", "usr/bin"))
    seed_s = seed_docker_store(lower, nd / "docker") if has_docker and fresh else 0.0
    boot_json = {"hostname": hostname, "image": image, "public_keys": public_keys, "node": i,
                 "sshd": not ssh_down_flag(state, i).exists(), "dockerd": dockerd_args(i) if has_docker else None}
    seed = nd / "seed"
    seed.mkdir(exist_ok=True)
    (seed / "boot.json").write_text(json.dumps(boot_json, indent=1) + "\n")
    (seed / "meta_data.json").write_text(json.dumps(meta_data, indent=1) + "\n")
    (seed / "user_data").write_bytes(user_data or b"")
    info = {"netns": netns or f"{NODE_PREFIX}{i}", "image": image, "image_tar": str(tar), "lower": str(lower),
            "hostname": hostname, "mark": mark,
            "docker": has_docker, "booted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "extract_s": round(extract_s, 2), "docker_seed_s": round(seed_s, 2)}
    (nd / "machine.json").write_text(json.dumps(info, indent=1) + "\n")
    (state / "run").mkdir(parents=True, exist_ok=True)
    cgroups_create(state, i)
    pidfile(state, i).unlink(missing_ok=True)
    with open(nd / "console.log", "ab") as console:
        # `launch` forks the launcher off and returns: the machine is nobody's child here.
        subprocess.run([sys.executable, "-I", str(HERE / "machine.py"), "launch", "--state", str(state),
                        "--node", str(i)], stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                       start_new_session=True, cwd="/", check=True, timeout=30)
    deadline = time.monotonic() + 30
    while booted(state, i) is None:
        try:
            pid = int(pidfile(state, i).read_text())
        except (OSError, ValueError):
            pid = None
        if pid is None or not _alive(pid):
            tail = (nd / "console.log").read_text(errors="replace")[-1500:]
            cgroups_remove(state, i)
            pidfile(state, i).unlink(missing_ok=True)
            raise MachineError(f"machine {i} did not boot: {tail}")
        if time.monotonic() > deadline:
            raise MachineError(f"machine {i} did not finish booting in 30 s (see {nd / 'console.log'})")
        time.sleep(0.02)
    if ssh_down_flag(state, i).exists():  # the knob was turned while the machine booted
        stop_sshd(state, i)
    info["boot_s"] = round(time.monotonic() - started, 2)
    (nd / "machine.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def seed_docker_store(lower: Path, store: Path) -> float:
    """A freshly deployed node's Docker data root holds what its image's ``/var/lib/docker``
    holds (the node image carries the workload image pre-loaded, docs/node-image.md), as a disk
    written from that image would. Returns the seconds it took (0 when there is nothing to seed).

    The image layers' contents (``overlay2/<id>/diff``) are hard links to the extracted image's
    read-only copy, shared by every node as copy-on-write disks share their base: Docker never
    writes into an image layer (a container writes to its own upper layer; ``docker rmi`` only
    unlinks), and a deploy then costs about a second instead of copying 2 GB. Every other file
    (the engine's metadata and databases, rewritten in place) is the node's own copy. The
    node's data root stays its own directory because overlay2 cannot sit on an overlayfs upper."""
    source = lower / "var" / "lib" / "docker"
    if not (source / "image").is_dir() or any(store.iterdir()):
        return 0.0
    started = time.monotonic()
    res = subprocess.run(["cp", "-a", "--link", f"{source}/.", f"{store}/"], capture_output=True, text=True,
                         check=False, timeout=600)
    if res.returncode != 0:
        raise MachineError(f"seeding the node's Docker store from {source} failed: {res.stderr.strip()[-500:]}")
    for dirpath, dirnames, filenames in os.walk(store):
        parts = Path(dirpath).relative_to(store).parts
        if len(parts) == 3 and parts[0] == "overlay2" and parts[2] == "diff":
            dirnames[:] = []  # a layer's contents: shared, never written
            continue
        for name in filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                own = path.with_name(f".{name}.seed")
                shutil.copy2(path, own)
                os.chown(own, st.st_uid, st.st_gid)
                os.replace(own, path)
    return time.monotonic() - started


def stop(state: Path, i: int, wipe: bool = False, timeout: float = 10) -> None:
    """Stop machine i (SIGTERM to its PID 1, SIGKILL after ``timeout``); remove its cgroups, and
    with ``wipe`` its disk, Docker data and boot record (an undeploy cleans the disk)."""
    launcher = launcher_pid(state, i)
    if launcher is not None:
        init = init_pid(state, i)
        if init is not None:
            _signal(init, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(launcher) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(launcher):
            init = init_pid(state, i)
            if init is not None:
                _signal(init, signal.SIGKILL)
            _signal(launcher, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while _alive(launcher) and time.monotonic() < deadline:
                time.sleep(0.05)
    pidfile(state, i).unlink(missing_ok=True)
    cgroups_remove(state, i)
    if wipe:
        wipe_disk(state, i)


def wipe_disk(state: Path, i: int) -> None:
    """Delete the node's disk (overlay upper/work), Docker data and boot record. Refuses while
    anything below the node's directory is still mounted on this host (never happens: all the
    machine's mounts are in its own namespace) rather than deleting through a mount."""
    nd = node_dir(state, i)
    mounted = [m for m in _host_mounts() if m.startswith(str(nd) + "/")]
    if mounted:
        raise MachineError(f"not wiping node {i}: still mounted on the host: {mounted}")
    for d in ("disk", "docker", "seed", "root"):
        shutil.rmtree(nd / d, ignore_errors=True)
    (nd / "machine.json").unlink(missing_ok=True)


def stop_sshd(state: Path, i: int) -> None:
    for p in sshd_pids(state, i):
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + 3
    while sshd_pids(state, i) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in sshd_pids(state, i):
        _signal(p, signal.SIGKILL)


def start_sshd(state: Path, i: int) -> None:
    """Start the machine's own sshd inside it (as ``systemctl start ssh`` would)."""
    init = init_pid(state, i)
    if init is None or sshd_pids(state, i):
        return
    res = subprocess.run(["nsenter", "-t", str(init), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w",
                          "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                          "/bin/sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -E /var/log/sshd.log"],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise MachineError(f"starting sshd in machine {i} failed: {res.stderr.strip()}")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _host_mounts() -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]


# --- the machine's own side: launch (host namespaces) and stage2 (new namespaces) ---------------

_libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC = 1, 2, 4, 8, 4096, 16384
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _mount(source: str, target: str | Path, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    rc = _libc.mount(source.encode(), str(target).encode(), fstype.encode() if fstype else None,
                     ctypes.c_ulong(flags), data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or ''} {source} on {target} ({data or ''}): {os.strerror(err)}")


def cmd_launch(state: Path, i: int) -> None:
    """Fork the launcher off (recording its pid) and return; the launcher joins the machine's
    cgroups, then becomes ``ip netns exec devcloud-node-<i> unshare ...`` whose child (PID 1 of
    the new PID namespace) runs stage2."""
    child = os.fork()
    if child != 0:
        pidfile(state, i).write_text(f"{child}\n")
        return
    for g in _recorded_cgroups(state, i):
        (Path(g["group"]) / "cgroup.procs").write_text(f"{os.getpid()}\n")
    netns = json.loads((node_dir(state, i) / "machine.json").read_text())["netns"]
    os.execvp("ip", ["ip", "netns", "exec", netns, "unshare", "--mount", "--uts", "--ipc",
                     "--pid", "--cgroup", "--fork", "--propagation", "private", sys.executable, "-I",
                     str(HERE / "machine.py"), "stage2", "--state", str(state), "--node", str(i)])


def cmd_stage2(state: Path, i: int) -> None:
    """PID 1 of the machine, still on the host's root: build the machine's root, pivot, exec its init."""
    nd = node_dir(state, i)
    info = json.loads((nd / "machine.json").read_text())
    boot_json = json.loads((nd / "seed" / "boot.json").read_text())
    socket.sethostname(boot_json["hostname"])
    root = nd / "root"
    # Relative paths (from the node's directory): the machine's /proc/mounts shows no host path.
    os.chdir(nd)
    lower = os.path.relpath(info["lower"], nd)
    _mount("overlay", root, "overlay", 0, f"lowerdir={lower},upperdir=disk/upper,workdir=disk/work")
    _mount("proc", root / "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("sysfs", root / "sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    cg = root / "sys" / "fs" / "cgroup"
    _mount("tmpfs", cg, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755")
    # The host's hierarchies as recorded by cgroups_create (this mount namespace, made by
    # `ip netns exec`, has a fresh /sys without them); mounted inside the cgroup namespace, each
    # shows the machine's own cgroup as its root.
    for g in _recorded_cgroups(state, i):
        if g["mount"].startswith("/sys/fs/cgroup/"):
            target = cg / Path(g["mount"]).relative_to("/sys/fs/cgroup")
            target.mkdir(parents=True, exist_ok=True)
            _mount("cgroup", target, g["fstype"], MS_NOSUID | MS_NODEV | MS_NOEXEC, g["options"] or None)
    dev = root / "dev"
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
    for name, major, minor in (("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8),
                               ("urandom", 1, 9), ("tty", 5, 0)):
        os.mknod(dev / name, 0o666 | 0o020000, os.makedev(major, minor))
        os.chmod(dev / name, 0o666)
    for d in ("pts", "shm", "mqueue"):
        (dev / d).mkdir()
    _mount("devpts", dev / "pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620,gid=5")
    _mount("tmpfs", dev / "shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    _mount("mqueue", dev / "mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.symlink("pts/ptmx", dev / "ptmx")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2"), ("core", "/proc/kcore")):
        os.symlink(target, dev / name)
    _mount("tmpfs", root / "run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    _mount("tmpfs", root / "tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    (root / "run" / "lock").mkdir(mode=0o1777)
    if boot_json.get("dockerd") is not None:
        (root / "var" / "lib" / "docker").mkdir(parents=True, exist_ok=True)
        _mount(str(nd / "docker"), root / "var" / "lib" / "docker", None, MS_BIND)
    run = root / "run" / "devcloud"
    run.mkdir(mode=0o755)
    shutil.copy(HERE / "nodeinit.py", run / "init.py")
    for f in ("boot.json", "meta_data.json", "user_data"):
        shutil.copy(nd / "seed" / f, run / f)
    (run / "boot.json").chmod(0o600)
    os.chdir(root)
    if _libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b".") != 0:
        raise OSError(ctypes.get_errno(), "pivot_root")
    if _libc.umount2(b".", MNT_DETACH) != 0:  # the host's root, stacked under the new one: gone
        raise OSError(ctypes.get_errno(), "umount2 old root")
    os.chdir("/")
    sys.stdout.flush()
    os.execve("/usr/bin/python3", ["/usr/bin/python3", "-I", "/run/devcloud/init.py"],
              {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"})


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="machine.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["launch", "stage2", "extract", "root"],
                        help="root: extract (when not yet) and print only the extracted root's path")
    parser.add_argument("--state", type=Path, default=Path(os.environ.get("DEVCLOUD_STATE", ROOT / ".devcloud")))
    parser.add_argument("--node", type=int)
    parser.add_argument("--image", help="extract: image name (stock, dlbench-node...)")
    args = parser.parse_args(argv)
    if args.command == "launch":
        cmd_launch(args.state, args.node)
    elif args.command == "stage2":
        cmd_stage2(args.state, args.node)
    else:
        tar = images(args.state)[args.image]
        lower, seconds = extract(args.state, args.image, tar)
        if args.command == "root":
            print(lower)
        else:
            print(f"{args.image}: {lower} ({f'extracted in {seconds:.1f} s' if seconds else 'already extracted'})")


if __name__ == "__main__":
    main()
