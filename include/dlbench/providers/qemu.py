"""The local provider's virtual machines: QEMU guests on this host behind the one Driver interface.

Why a driver and not a special case: the embedded ``local`` provider offers ``virtual_machine``
and ``container_on_vm`` through the same :class:`~dlbench.providers.machines.MachineBackend`
lifecycle as a cloud (run key, create, wait ready, SSH, prepare, stage data, release by tag), so
a laptop gets all four platforms with no cloud and exercises the code a cloud run uses.

Each guest is a daemonized ``qemu-system-x86_64`` booting the project's VM image
(``make vm-image``, docs/vm-image.md) from a qcow2 overlay of its own, with the run's public key
on a NoCloud seed ISO (volume id ``cidata``), reached over user-mode networking
(``hostfwd=tcp:127.0.0.1:<port>-:22``, ``restrict=on``: the guest reaches nothing but that
forward). Its state (tags, lease, port, pid) lives in ``$DLBENCH_HOME/vms/<name>/state.json``,
which is what :meth:`QemuDriver.find` lists: a SIGKILLed run's guests are still found by tag,
and the janitor kills them once their lease lapsed.

Acceleration: hardware KVM only where it really works (``accel=auto`` checks the CPU's
virtualization flags and boots the image's kernel under KVM for a few seconds); otherwise TCG,
and every target says ``emulated=true`` so reports never pass emulated numbers off as a VM's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from dlbench import paths
from dlbench.errors import ProvisioningError, WaitTimeout
from dlbench.grammar import AbsolutePath
from dlbench.polling import Deadline, poll, poll_each
from dlbench.providers.base import BootConfig, Demand, Driver, Instance, RunIsActive, SweepAction, Tags, resource_name
from dlbench.providers.settings import MachineSettings, Runtime
from dlbench.providers.sweep import sweep_driver
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)

QEMU = "qemu-system-x86_64"
STATE_FILE = "state.json"
STOP_GRACE_S = 10.0
"""At most this long for a guest's QEMU to exit after SIGTERM (then SIGKILL, and as long again)."""
STOP_POLL_S = 0.1


Accel = Literal["auto", "kvm", "tcg"]
DEFAULT_VM_IMAGE_DIR = Path(__file__).resolve().parents[3] / "build" / "vm-image"
"""Where ``make vm-image`` writes the VM image in a checkout (docs/vm-image.md)."""


class LocalVMSettings(MachineSettings):
    """The local provider's guests: one QEMU VM per machine, on this host.

    VM rows are opt-in: ``make run``'s default platforms do not include them (emulated guests are
    10-70x slower than this host). ``container_on_vm`` shares the ``virtual_machine`` guest when
    both are requested (one boot)."""

    name: Literal["local-vm"] = "local-vm"
    platforms: ClassVar[dict[Platform, Runtime]] = {
        Platform.VIRTUAL_MACHINE: "host", Platform.CONTAINER_ON_VM: "docker"}
    enabled: bool = Field(default=True, description="false: the VM platforms are reported skipped, nothing boots")
    share_nodes: bool = Field(default=True, description="container_on_vm on the virtual_machine guest")
    image_dir: AbsolutePath | None = Field(
        default=None, description="the VM image's directory (manifest.json, qcow2, kernel, initrd); "
                                  "default: build/vm-image of this checkout")
    vcpus: int = Field(default=2, ge=1, le=256)
    memory_mb: int = Field(default=4096, ge=512, le=1024 * 1024)
    accel: Accel = Field(default="auto", description="auto: KVM where it really works, else TCG (emulated)")
    ready_timeout: float = Field(default=600, gt=0, le=6 * 3600, description="s until every guest answers SSH")
    ssh_timeout: float = Field(default=300, gt=0, le=3600)
    lease_minutes: float = Field(default=15, ge=0.05, le=24 * 60)

    def image_path(self) -> Path:
        return Path(self.image_dir) if self.image_dir else DEFAULT_VM_IMAGE_DIR



def vms_dir() -> Path:
    """Per-guest state directories (overlay disk, seed ISO, serial log, state.json)."""
    return paths.home() / "vms"


# --- the image and the accelerator ----------------------------------------------------------------


@dataclass(frozen=True)
class VMImage:
    """The built image (docker/build-vm-image.sh): disk, kernel, initrd and the kernel command line."""

    directory: Path
    disk: Path
    kernel: Path
    initrd: Path
    cmdline: str
    manifest: dict[str, object]

    @classmethod
    def load(cls, directory: Path) -> VMImage:
        """The image in ``directory``; FileNotFoundError naming what is missing and how to build it."""
        manifest_path = directory / "manifest.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"no VM image in {directory} (no manifest.json): run `make vm-image`")
        manifest = json.loads(manifest_path.read_text())
        image = cls(directory=directory, disk=directory / str(manifest.get("disk", "dlbench-vm.qcow2")),
                    kernel=directory / "vmlinuz", initrd=directory / "initrd.img",
                    cmdline=str(manifest["cmdline"]), manifest=manifest)
        for part in (image.disk, image.kernel, image.initrd):
            if not part.is_file():
                raise FileNotFoundError(f"VM image incomplete: {part} is missing (run `make vm-image`)")
        return image


_ACCEL_CACHE: dict[str, tuple[str, str]] = {}
_ACCEL_LOCK = threading.Lock()
KVM_PROBE_TIMEOUT_S = 30.0


def kvm_usable(kernel: Path | None = None) -> tuple[bool, str]:
    """(usable?, why): hardware KVM that really runs a guest, not just a ``/dev/kvm`` node.

    A ``/dev/kvm`` can exist where guests hang or crash (nested virtualization without the CPU
    flags). So: the device must be openable, the CPU must advertise ``vmx``/``svm``, and the
    image's own kernel must boot under KVM to the point where it looks for its root disk
    (``-no-reboot``: its panic ends QEMU) within :data:`KVM_PROBE_TIMEOUT_S`. Cached per process."""
    key = str(kernel)
    with _ACCEL_LOCK:
        if key in _ACCEL_CACHE:
            ok, why = _ACCEL_CACHE[key]
            return ok == "yes", why
        result = _probe_kvm(kernel)
        _ACCEL_CACHE[key] = ("yes" if result[0] else "no", result[1])
        return result


def _probe_kvm(kernel: Path | None) -> tuple[bool, str]:
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not accessible to this user"
    try:
        flags = {f for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")
                 for f in line.split(":", 1)[1].split()}
    except OSError as exc:
        return False, f"cannot read /proc/cpuinfo: {exc}"
    if not flags & {"vmx", "svm"}:
        return False, "the CPU advertises no vmx/svm (a /dev/kvm without hardware virtualization)"
    if kernel is None or not kernel.is_file() or shutil.which(QEMU) is None:
        return False, "no kernel or QEMU to probe KVM with"
    argv = [QEMU, "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-display", "none",
            "-no-reboot", "-serial", "stdio", "-kernel", str(kernel), "-append", "console=ttyS0 panic=-1"]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=KVM_PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return False, f"a KVM guest did not reach its root mount within {KVM_PROBE_TIMEOUT_S:.0f} s (hung)"
    out = proc.stdout.decode(errors="replace")
    if "VFS:" in out or "Kernel panic" in out:
        return True, f"a KVM guest booted its kernel in {time.monotonic() - started:.1f} s"
    err = proc.stderr.decode(errors="replace")
    return False, f"a KVM guest crashed (status {proc.returncode}): {(out + err)[-300:]}"


def choose_accel(wanted: str, kernel: Path | None) -> tuple[str, str]:
    """(``kvm`` or ``tcg``, why). ``kvm`` asked for but unusable raises (a skip with the reason)."""
    if wanted == "tcg":
        return "tcg", "accel=tcg asked for"
    ok, why = kvm_usable(kernel)
    if ok:
        return "kvm", why
    if wanted == "kvm":
        raise RuntimeError(f"accel=kvm asked for, but KVM is not usable here: {why}")
    return "tcg", f"KVM not usable ({why}): TCG emulation"


# --- state files ----------------------------------------------------------------------------------


def _write_json(path: Path, data: dict[str, object]) -> None:
    """Atomically (rename): a reader (the janitor, another task's lease keeper) never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".state-", suffix=".json")
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
    os.replace(tmp, path)


def _process_of(state_dir: Path) -> int | None:
    """The guest's QEMU pid when that process is alive *and* is this guest's (its command line
    names the state directory): a recycled pid is never killed."""
    try:
        pid = int((state_dir / "qemu.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if str(state_dir) in cmdline else None


def _wait_exit(state_dir: Path, deadline: Deadline) -> None:
    """Until the guest's QEMU is gone; :class:`WaitTimeout` at the deadline."""
    poll(lambda: _process_of(state_dir), lambda pid: pid is None, deadline, STOP_POLL_S, retry=False)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ssh_banner(port: int, timeout: float = 3.0) -> bool:
    """True when an SSH server answers on 127.0.0.1:``port``. User-mode networking accepts the
    TCP connection before the guest listens, so only the banner says sshd is up."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def guest_hostname(name: str) -> str:
    """The guest's hostname: its resource name as a valid host name (RFC 1123: letters, digits and
    dashes, at most 63 characters). An Airflow run id's ``_`` would make cloud-init keep ``localhost``."""
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-")[:63].rstrip("-") or "guest"


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_bytes()[-chars:].decode(errors="replace")
    except OSError:
        return ""


# --- the driver -----------------------------------------------------------------------------------


class QemuDriver(Driver):
    """QEMU guests on this host (see the module docstring)."""

    name: ClassVar[str] = "qemu"
    timing_phases: ClassVar[tuple[str, ...]] = ("create", "boot", "delete")
    """``create``: overlay disk, seed ISO, QEMU started; ``boot``: QEMU start to the guest's SSH
    banner; ``delete``: QEMU stopped and the guest's files removed."""

    def __init__(self, settings: LocalVMSettings) -> None:
        self.settings = settings
        self.root = vms_dir()

    # -- checks ---------------------------------------------------------------------------------
    def preflight(self, demands: list[Demand]) -> None:
        """Everything a guest needs before one is started: QEMU, qemu-img, genisoimage, the image."""
        if not self.settings.enabled:
            raise RuntimeError("local VMs are disabled (provider.vm.enabled is false)")
        for tool in (QEMU, "qemu-img", "genisoimage"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is not installed (apt-get install qemu-system-x86 qemu-utils genisoimage)")
        VMImage.load(self.settings.image_path())

    # -- create ---------------------------------------------------------------------------------
    def create(self, demand: Demand, tags: Tags, boot: BootConfig, deadline: Deadline) -> list[Instance]:
        image = VMImage.load(self.settings.image_path())
        accel, why = choose_accel(self.settings.accel, image.kernel)
        if accel == "tcg":
            log.warning("local VMs run under TCG emulation (%s): their numbers are labelled emulated and are "
                        "10-70x slower than this host", why)
        made: list[Instance] = []
        try:
            for index in range(demand.count):
                made.append(self._create_one(image, accel, demand, index, tags, boot))
        except BaseException:
            self.delete(made, Deadline(60, "rollback of created guests"))
            raise
        return made

    def _create_one(self, image: VMImage, accel: str, demand: Demand, index: int, tags: Tags,
                    boot: BootConfig) -> Instance:
        started = time.monotonic()
        name = resource_name(tags.run_id, demand.role, index)
        state_dir = self.root / name
        if state_dir.exists():  # a leftover of the same run (an earlier attempt): ours, by name
            self._destroy(state_dir)
        state_dir.mkdir(parents=True)
        os.chmod(state_dir, 0o700)
        overlay = state_dir / "disk.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(image.disk),
                        str(overlay)], check=True, capture_output=True, timeout=60)
        self._seed(state_dir, name, boot)
        state: dict[str, object] = {
            "name": name, "platform": demand.platform, "role": demand.role, "index": index,
            "tags": tags.as_dict(), "accel": accel, "emulated": accel != "kvm", "image": str(image.directory),
            "kernel": str(image.manifest.get("kernel", "")), "vcpus": self.settings.vcpus,
            "memory_mb": self.settings.memory_mb, "created_at": datetime.now(UTC).isoformat()}
        _write_json(state_dir / STATE_FILE, state)  # before QEMU starts: find() sees it whatever happens next
        port = self._start(state_dir, image, accel)
        state.update(port=port, started_at=time.time())
        _write_json(state_dir / STATE_FILE, state)
        inst = self._instance(state_dir, state)
        inst.timings["create"] = time.monotonic() - started
        log.info("started guest %s (%s, %d vCPU, %d MiB, ssh 127.0.0.1:%d)", name, accel, self.settings.vcpus,
                 self.settings.memory_mb, port)
        return inst

    @staticmethod
    def _seed(state_dir: Path, name: str, boot: BootConfig) -> None:
        """The NoCloud seed: ``meta-data`` (instance id, hostname, the run's public key) and the
        run's ``user-data`` verbatim, on an ISO with volume id ``cidata``."""
        seed = state_dir / "seed"
        seed.mkdir()
        meta = {"instance-id": f"{name}-{uuid.uuid4().hex[:8]}", "local-hostname": guest_hostname(name),
                "public-keys": [boot.public_key]}
        (seed / "meta-data").write_text(json.dumps(meta) + "\n")  # JSON is YAML
        (seed / "user-data").write_text(boot.user_data or "#cloud-config\n")
        subprocess.run(["genisoimage", "-quiet", "-output", str(state_dir / "seed.iso"), "-volid", "cidata",
                        "-joliet", "-rock", str(seed / "user-data"), str(seed / "meta-data")],
                       check=True, capture_output=True, timeout=60)

    def _start(self, state_dir: Path, image: VMImage, accel: str) -> int:
        """Start the daemonized QEMU; the forwarded SSH port. A port taken between choosing and
        binding it (another guest starting) is retried with a fresh one."""
        s = self.settings
        error = ""
        for _ in range(5):
            port = _free_port()
            argv = [QEMU, "-name", f"{state_dir.name},process={state_dir.name[:15]}",
                    "-machine", f"q35,accel={accel}", "-cpu", "host" if accel == "kvm" else "max",
                    "-smp", str(s.vcpus), "-m", str(s.memory_mb), "-nodefaults", "-display", "none",
                    "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", image.cmdline,
                    "-drive", f"file={state_dir / 'disk.qcow2'},if=virtio,format=qcow2,discard=unmap",
                    "-drive", f"file={state_dir / 'seed.iso'},if=virtio,format=raw,readonly=on",
                    "-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:22",
                    "-device", "virtio-net-pci,netdev=net0",
                    "-object", "rng-random,id=rng0,filename=/dev/urandom", "-device", "virtio-rng-pci,rng=rng0",
                    "-serial", f"file:{state_dir / 'serial.log'}",
                    "-pidfile", str(state_dir / "qemu.pid"), "-daemonize"]
            (state_dir / "qemu.argv").write_text(json.dumps(argv))
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
            if proc.returncode == 0 and _process_of(state_dir) is not None:
                return port
            error = (proc.stderr or proc.stdout).strip()[-800:]
            if "hostfwd" not in error and "forwarding" not in error:
                break
        raise ProvisioningError(f"QEMU did not start guest {state_dir.name}: "
                                f"{error or 'no QEMU process after start'}")

    # -- wait -----------------------------------------------------------------------------------
    def wait_ready(self, instances: list[Instance], deadline: Deadline) -> list[Instance]:
        """Until every guest's sshd answers on its forwarded port; a guest whose QEMU died, or one
        still booting at the deadline, raises with the end of its serial console."""

        def booted(inst: Instance, pid: int | None) -> bool:
            if pid is None:
                raise ProvisioningError(f"guest {inst.name}: QEMU exited during boot; serial console:\n"
                                        f"{_tail(self.root / inst.name / 'serial.log')}")
            if not ssh_banner(int(inst.details["ssh_port"])):  # type: ignore[call-overload]  # an int, set by create
                return False
            started = float(inst.details.get("started_at", 0) or 0)  # type: ignore[arg-type]  # a float, set by create
            inst.timings["boot"] = time.time() - started if started else 0.0
            log.info("guest %s answers SSH after %.1f s (%s)", inst.name, inst.timings["boot"],
                     inst.details.get("accel"))
            return True

        def timeout(pending: list[Instance]) -> str:
            last = pending[0]
            return (f"guest(s) {', '.join(i.id for i in pending)} not answering SSH within {deadline.seconds:.0f} s "
                    f"({deadline.what}); serial console of {last.name}:\n{_tail(self.root / last.name / 'serial.log')}")

        poll_each(instances, lambda inst: _process_of(self.root / inst.name), booted, deadline,
                  self.settings.poll_interval, timeout=timeout, retry=False)  # local: nothing transient to retry
        return instances

    # -- delete / renew / find --------------------------------------------------------------------
    def delete(self, instances: list[Instance], deadline: Deadline) -> dict[str, float]:
        """Kill each guest's QEMU and remove its directory (overlay, seed, logs). Idempotent."""
        timings = {}
        for inst in instances:
            started = time.monotonic()
            self._destroy(self.root / inst.name, max(deadline.remaining(), 1.0))
            timings[inst.id] = time.monotonic() - started
        return timings

    @staticmethod
    def _destroy(state_dir: Path, grace: float = STOP_GRACE_S) -> None:
        pid = _process_of(state_dir)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            try:
                _wait_exit(state_dir, Deadline(min(grace, STOP_GRACE_S), f"guest {state_dir.name} stopping"))
            except WaitTimeout:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(WaitTimeout):  # a QEMU that outlives SIGKILL: its files go anyway
                    _wait_exit(state_dir, Deadline(STOP_GRACE_S, f"guest {state_dir.name} killed"))
        shutil.rmtree(state_dir, ignore_errors=True)

    def renew(self, instances: list[Instance], until: datetime) -> None:
        """The lease into each guest's state file (the janitor reads it there)."""
        for inst in instances:
            path = self.root / inst.name / STATE_FILE
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # deleted meanwhile
            state["tags"] = {**state.get("tags", {}), "dlbench_lease_until": until.astimezone(UTC).isoformat()}
            with contextlib.suppress(OSError):  # the guest's directory went away meanwhile (released)
                _write_json(path, state)

    def find(self, run_id: str | None = None) -> dict[str, list[Instance]]:
        """Our guests by the tags in their state files (a directory without our tags is skipped)."""
        found: dict[str, list[Instance]] = {}
        for state_dir in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            try:
                state = json.loads((state_dir / STATE_FILE).read_text())
            except (OSError, ValueError):
                continue
            tags = Tags.from_dict(state.get("tags"))
            if tags is None or (run_id is not None and tags.run_id != run_id):
                continue
            found.setdefault(tags.run_id, []).append(self._instance(state_dir, state, tags))
        return found

    def _instance(self, state_dir: Path, state: dict[str, object], tags: Tags | None = None) -> Instance:
        emulated = bool(state.get("emulated", True))
        return Instance(
            id=str(state["name"]), name=str(state["name"]), platform=str(state.get("platform", "")),
            provider=self.name, tags=tags or Tags.from_dict(state["tags"]) or Tags(run_id="?"),  # type: ignore[arg-type]  # JSON
            role=str(state.get("role", "")), address="127.0.0.1",
            details={"ssh_port": state.get("port"), "accel": state.get("accel"), "pid": _process_of(state_dir),
                     "state_dir": str(state_dir), "started_at": state.get("started_at"),
                     "labels": {"accel": str(state.get("accel")), "emulated": "true" if emulated else "false",
                                "vm_vcpus": str(state.get("vcpus")), "vm_memory_mb": str(state.get("memory_mb")),
                                "vm_kernel": str(state.get("kernel"))}})


def sweep_local_vms(is_active: RunIsActive, *, now: datetime | None = None, dry_run: bool = False
                    ) -> tuple[list[SweepAction], list[dict[str, str]]]:
    """The local provider's QEMU guests on this host (found by the tags in their state
    directories): a SIGKILLed ``make run`` leaves them running until their lease lapses."""
    if not vms_dir().is_dir():
        return [], []
    settings = LocalVMSettings()
    return sweep_driver(QemuDriver(settings), settings.release_timeout, is_active, now=now, dry_run=dry_run)
