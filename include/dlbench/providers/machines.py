"""The one machine lifecycle every cloud provider goes through (PerfKit's BaseResource shape).

A driver (:class:`~dlbench.providers.base.Driver`) fills in preflight / create / wait_ready /
delete / find; this backend owns everything providers share:

1. **plan**: machines per platform (``nodes``), container platforms on the host platform's
   machines when ``share_nodes``;
2. **run key**: a fresh ed25519 key per run, its public half in every machine's boot config; the
   private key is a run secret (:mod:`dlbench.providers.run_secrets`: an Airflow Variable inside
   Airflow, deleted at release), never in XCom: targets carry a reference to it, and each task
   that needs it as a file gets a 0600 temporary copy for its own duration; the pinned host keys
   (``known_hosts``) and the run's tags are per-run state in the shared store (docs/storage.md);
3. **create -> wait ready -> reachable over SSH -> prepare -> stage data**, per machine in
   parallel, each phase timed (the driver's own phases plus ``reachable_over_ssh``, ``prepare``,
   ``stage_data``);
4. **rollback**: any failure (``BaseException``: Airflow's task timeout too) releases everything
   tagged with the run and removes the run's key before the error propagates (Airflow skips a
   teardown whose setup failed);
5. **release by tag**: from the request and the tags alone (both in XCom), so it works on any
   worker and when setup died half-way; then the provisioning timings go to the archive as
   ``provisioning`` documents, and the run's key is removed.

The budget, the rollback, release by tag and the timings archive are :class:`ProvisioningBackend`'s,
which the Magnum backend (a Kubernetes cluster per run through its driver) shares.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar, Literal

from dlbench import paths, storage
from dlbench.errors import ExecutionError, WaitTimeout
from dlbench.execution.gpus import GpuFacts, allot, parse_probe, probe_argv
from dlbench.execution.image import frameworks_needed
from dlbench.execution.prepare import image_archives, prepare
from dlbench.execution.staging import check_remote_data, stage_data
from dlbench.execution.targets import HOST_LABEL, SSHDocker, SSHHost, Target
from dlbench.execution.transport import RemoteHost, wait_reachable
from dlbench.polling import Deadline
from dlbench.providers import run_secrets
from dlbench.providers.backend import ProviderBackend, RunRequest
from dlbench.providers.base import HOST_ID, BootConfig, Demand, Driver, Instance, Tags, parallelism
from dlbench.providers.datasets import ensure_dataset, remote_dataset_dir
from dlbench.providers.leases import LeaseKeeper
from dlbench.providers.settings import MachineSettings
from dlbench.providers.timings import timings_document
from dlbench.warehouse import archive
from dlbench.workloads.profiles import Scenario
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)

ROLES = {Platform.BARE_METAL: "bm", Platform.CONTAINER_ON_BARE_METAL: "cbm", Platform.VIRTUAL_MACHINE: "vm",
         Platform.CONTAINER_ON_VM: "cvm"}
"""Short role names in resource names (``dlbench-<run>-<role>-<n>``)."""


# --- the run's SSH key -------------------------------------------------------------------------

def key_dir(run_id: str) -> Path:
    """Legacy per-worker place of a run's key (before the key became a run secret); only removed."""
    return paths.runs_dir() / run_id / "ssh"


def generate_key() -> tuple[str, str]:
    """A fresh ed25519 keypair in memory: (OpenSSH private key PEM, OpenSSH public key line)."""
    from cryptography.hazmat.primitives import serialization  # cryptography: heavy, only for a run's key
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # (the same)

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    return private.decode(), public_line(private.decode())


def public_line(private_pem: str) -> str:
    """The OpenSSH public key line of a private key (``ssh-ed25519 AAAA... dlbench``)."""
    from cryptography.hazmat.primitives import serialization  # cryptography: heavy, only for a run's key

    key = serialization.load_ssh_private_key(private_pem.encode(), password=None)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return public.decode() + " dlbench"


def generate_keypair(directory: Path) -> tuple[Path, str]:
    """A fresh ed25519 keypair as files: (private key path, OpenSSH public key line). 0700 dir,
    0600 key. For tools and tests that want a key on disk; a run's key is a run secret instead."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    private, line = generate_key()
    path = run_secrets.write_private(directory / "id_ed25519", private)
    path.with_suffix(".pub").write_text(line + "\n")
    return path, line


def run_key(run_id: str) -> tuple[str, str]:
    """The run's key (private PEM, public line): the one made by another provider of the same run
    (CompositeBackend: one key per run), else a new one kept as the run's secret."""
    existing = run_secrets.get_secret(run_id, run_secrets.SSH_KEY)
    if existing:
        return existing, public_line(existing)
    private, public = generate_key()
    run_secrets.put_secret(run_id, run_secrets.SSH_KEY, private)
    return private, public


def remove_run_state(run_id: str) -> None:
    """The run's secrets and its state in the store (tags, known_hosts), and any legacy local
    state on this worker: gone on every exit path."""
    try:
        run_secrets.delete_secrets(run_id)
    finally:
        storage.store().remove(storage.run_state_key(run_id))
        shutil.rmtree(paths.runs_dir() / run_id, ignore_errors=True)


# --- the plan ----------------------------------------------------------------------------------

@dataclass
class Machine:
    """One provisioned instance and the platforms that run on it."""

    instance: Instance
    platforms: list[Platform] = field(default_factory=list)
    python: str = "python3"
    pythonpath: str | None = None
    pythons: dict[str, str] = field(default_factory=dict)
    """framework -> the interpreter of its own venv on the machine (prepare stage: vLLM's)."""
    data_dir: str | None = None
    skip_docker: str | None = None
    framework_skips: dict[str, str] = field(default_factory=dict)
    """framework -> why its workload image is not in the machine's engine (its jobs skip)."""
    gpus: GpuFacts = field(default_factory=GpuFacts)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ssh_port(self) -> int:
        """The instance's SSH port: ``details["ssh_port"]`` when the driver forwards one (a local
        QEMU guest behind user-mode networking), else 22."""
        return int(self.instance.details.get("ssh_port") or 22)  # type: ignore[call-overload]  # an int or None


def plan_demands(request: RunRequest, settings: MachineSettings) -> list[Demand]:
    """Machines per platform; a container platform shares its host platform's machines when
    ``share_nodes`` is set and that platform is requested too. Each demand names the run's
    distributed port (its profile's, a user profile's included) for clouds that firewall it."""
    demands = []
    # The distributed scenario puts each role on its own instance: on a cloud that schedules
    # several VMs per host, they must land on different hosts too, or the network is not measured.
    # The shared-resource scenario compares a job alone and next to a background job on the same
    # physical machine: VMs of one run are packed on one host (each job in its own VM there).
    placement: Literal["", "spread", "pack"] = ("spread" if Scenario.DISTRIBUTED in request.scenarios
                                                else "pack" if Scenario.SHARED in request.scenarios else "")
    ports: tuple[tuple[str, int, int], ...] = ()
    if Scenario.DISTRIBUTED in request.scenarios:
        port = request.resolved_profile.scenarios.distributed.port
        ports = (("tcp", port, port),)
    for platform in request.platforms:
        host = settings.host_platform_of(platform)
        if settings.share_nodes and host is not None and host in request.platforms:
            continue
        demands.append(Demand(role=ROLES[platform], platform=platform.value, count=settings.node_count(platform),
                              placement=placement, ports=ports))
    return demands


def _named(exc: BaseException, machine: str) -> BaseException:
    """The same error, its message prefixed with the machine it happened on. Exception types
    whose constructor takes other arguments (SDK errors) keep their message and get a note."""
    if isinstance(exc, Exception):
        try:
            named = type(exc)(f"{machine}: {exc}")
        except TypeError:
            exc.add_note(f"on machine {machine}")
            return exc
        return named.with_traceback(exc.__traceback__)
    return exc


class ProvisioningBackend(ProviderBackend):
    """The lifecycle every backend that provisions through a :class:`Driver` shares
    (:class:`MachineBackend`'s machines, the Magnum backend's cluster), in one place:

    - **budget**: the setup task's ``execution_timeout`` is the whole budget; provisioning gets
      what is left after a reserve for releasing everything again, so a setup that runs out of
      time still has time to roll back before Airflow kills it (:meth:`budgets`);
    - **rollback**: any failure (``BaseException``: Airflow's task timeout too) releases what the
      run made before the error propagates, because Airflow skips a teardown whose setup failed
      (:meth:`rolled_back`);
    - **release by tag** (:meth:`release_by_tag`) and the provisioning timings archived as
      ``provisioning`` documents (:meth:`archive_timings`).
    """

    ROLLBACK_RESERVE_MIN_S: ClassVar[float] = 30.0
    """The least the budget keeps for the rollback (unless the release timeout is shorter)."""

    def __init__(self, settings: MachineSettings, driver: Driver) -> None:
        self.settings = settings
        self.driver = driver

    @abc.abstractmethod
    def setup_seconds(self, budget_s: float | None) -> float:
        """The whole setup budget in seconds: from the task's ``budget_s``, else the settings' timeouts."""

    def budgets(self, budget_s: float | None) -> tuple[Deadline, float]:
        """(deadline for the provisioning work, seconds kept for the rollback)."""
        total = self.setup_seconds(budget_s)
        reserve = min(self.settings.release_timeout, max(self.ROLLBACK_RESERVE_MIN_S, 0.25 * total))
        return Deadline(max(total - reserve, 1.0), f"provisioning within the setup budget ({total:.0f} s)"), reserve

    @contextlib.contextmanager
    def rolled_back(self, run_id: str, rollback: Callable[[], object],
                    then: Callable[[], None] | None = None) -> Iterator[None]:
        """The ``with`` body; when it fails in any way, ``rollback()`` (a failure of its own is
        logged, not raised: the janitor retries by tag, and the first error is the one to see),
        then ``then()`` in any case, then the error propagates."""
        try:
            yield
        except BaseException as exc:
            log.error("acquire failed (%s: %s); releasing every resource tagged with run %s",
                      type(exc).__name__, exc, run_id)
            try:
                rollback()
            except Exception as cleanup:  # noqa: BLE001 - the janitor retries by tag; keep the first error
                log.error("release after failed acquire incomplete (the janitor will retry): %s", cleanup)
            finally:
                if then is not None:
                    then()
            raise

    def release_by_tag(self, run_id: str, deadline: Deadline | None = None) -> dict[str, float]:
        """Delete everything the driver finds tagged with ``run_id``, within ``deadline`` (default:
        ``release_timeout`` from when the search is done); seconds per deleted resource."""
        found = self.driver.find(run_id).get(run_id, [])
        started = time.monotonic()
        timings = self.driver.delete(found, deadline or Deadline(self.settings.release_timeout,
                                                                 f"release of run {run_id}"))
        log.info("released %d resource(s) of run %s in %.1f s: %s", len(found), run_id,
                 time.monotonic() - started, ", ".join(i.name for i in found) or "(none)")
        return timings

    def archive_timings(self, targets: list[Target], run_id: str, deleted: dict[str, float]) -> list[Path]:
        """The driver's phase timings of each target's resource (plus its delete) into the run's archive."""
        return archive_timings(targets, run_id, self.driver.name, deleted, self.driver.timing_phases)


class MachineBackend(ProvisioningBackend):
    """See the module docstring."""

    # -- validate -------------------------------------------------------------------------------
    def preflight(self, request: RunRequest) -> None:
        parallelism(1, strict=True)  # a bad DLBENCH_PROVISION_THREADS is refused before anything exists
        self.driver.preflight(plan_demands(request, self.settings))

    # -- setup ----------------------------------------------------------------------------------
    def setup_seconds(self, budget_s: float | None) -> float:
        s = self.settings
        return budget_s if budget_s else s.ready_timeout + s.ssh_timeout + s.prepare_timeout + s.release_timeout

    def acquire(self, request: RunRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        s = self.settings
        demands = plan_demands(request, s)
        work, reserve = self.budgets(budget_s)
        parallelism(1, strict=True)
        self.driver.preflight(demands)
        generated = s.ssh_key_path is None
        tags = dataclasses.replace(tags, lease_until=datetime.now(UTC) + timedelta(minutes=s.lease_minutes))

        def rollback() -> None:
            self.release_by_tag(tags.run_id, Deadline(max(reserve, 30.0), f"rollback of run {tags.run_id}"))

        with self.rolled_back(tags.run_id, rollback, then=lambda: remove_run_state(tags.run_id)), \
                self.keep_alive(tags):
            return self._acquire(request, tags, demands, work, generated)

    def keep_alive(self, tags: Tags) -> LeaseKeeper:
        return LeaseKeeper(self.driver, tags.run_id, timedelta(minutes=self.settings.lease_minutes))

    def _acquire(self, request: RunRequest, tags: Tags, demands: list[Demand], work: Deadline,
                 generated: bool) -> list[Target]:
        s = self.settings
        store = storage.store()
        # The run's record first (tags and lease, no secret), so the janitor can tell when the run's
        # state is over even if this process is killed right after making the key.
        run_secrets.record_run(tags)
        if generated:
            _, public = run_key(tags.run_id)
            key_ref = run_secrets.ref(tags.run_id, run_secrets.SSH_KEY)
        else:
            key_ref = str(s.ssh_key_path)  # the user's own key: a path that must exist on every worker
            public = Path(f"{s.ssh_key_path}.pub").read_text().strip()
        boot = BootConfig(public_key=public, user_data=f"#cloud-config\n# dlbench run {tags.run_id}\n")
        deadline = Deadline(min(s.ready_timeout, max(work.remaining(), 0.1)),
                            f"machines of run {tags.run_id} ready")
        by_platform: dict[Platform, list[Instance]] = {}
        for demand in demands:
            by_platform[Platform(demand.platform)] = self.driver.create(demand, tags, boot, deadline)
        machines = self._machines(request, by_platform)
        self.driver.wait_ready([m.instance for m in machines], deadline)
        hosts_key = storage.run_state_key(tags.run_id, run_secrets.KNOWN_HOSTS)
        with run_secrets.private_dir(tags.run_id) as private:
            key_path = (str(run_secrets.write_private(private / "id_ed25519", run_key(tags.run_id)[0]))
                        if generated else key_ref)
            known_hosts = private / run_secrets.KNOWN_HOSTS
            known_hosts.write_text(store.read_text(hosts_key) if store.exists(hosts_key) else "")
            self._make_ready(request, machines, key_path, str(known_hosts), work)
            store.write_text(hosts_key, known_hosts.read_text())  # pinned on first use, for every worker
        # Targets name the key by reference and known_hosts by the store's key; run_job materialises both.
        return self._targets(request, tags, by_platform, machines, key_ref, run_secrets.STORE_REF + hosts_key)

    def _machines(self, request: RunRequest, by_platform: dict[Platform, list[Instance]]) -> list[Machine]:
        machines: dict[str, Machine] = {}
        for platform in request.platforms:
            for inst in self._instances_for(platform, by_platform):
                if inst.id not in machines:
                    # Facts the driver knows about the machine (e.g. accel, emulated) reach the documents.
                    labels = inst.details.get("labels")
                    machines[inst.id] = Machine(instance=inst, labels=dict(labels) if isinstance(labels, dict) else {})
                machines[inst.id].platforms.append(platform)
        return list(machines.values())

    def _instances_for(self, platform: Platform, by_platform: dict[Platform, list[Instance]]) -> list[Instance]:
        if platform in by_platform:
            return by_platform[platform]
        return by_platform[self.settings.host_platform_of(platform)]  # type: ignore[index]  # shared: has a host

    def _make_ready(self, request: RunRequest, machines: list[Machine], key_path: str,
                    known_hosts: str, work: Deadline) -> None:
        """Reachable over SSH, prepared, data staged: every machine in parallel, each timed."""
        s = self.settings
        local_data = ensure_dataset(request) if not request.data_dir else None
        needs_data = request.needs_data_set  # a job of the run reads the data directory (each suite says)

        def ready(machine: Machine) -> None:
            inst = machine.instance
            ssh_limit = min(s.ssh_timeout, max(work.remaining(), 0.1))
            try:
                inst.timings["reachable_over_ssh"] = wait_reachable(
                    str(inst.address) if machine.ssh_port == 22 else f"{inst.address}:{machine.ssh_port}",
                    s.ssh_user, key_path, ssh_limit, s.poll_interval, known_hosts)
            except ExecutionError as exc:
                if ssh_limit >= s.ssh_timeout:
                    raise
                # The provisioning budget, not ssh_timeout, ended this wait: say so, as the deploy
                # wait does, so the user raises the budget rather than looks for a network fault.
                raise WaitTimeout(f"not ready in time: {work.what} had {ssh_limit:.0f} s left for SSH "
                                  f"(ssh_timeout is {s.ssh_timeout:.0f} s): {exc}") from exc
            access = SSHHost(address=str(inst.address), port=machine.ssh_port, user=s.ssh_user, key_path=key_path,
                             known_hosts=known_hosts, python=s.remote_python or "python3")
            runtimes: set[str] = {s.runtime_for(p) for p in machine.platforms}
            with RemoteHost.from_access(access) as host:
                if s.prepare:
                    self._prepare(machine, host, runtimes, request)
                else:
                    machine.python = s.remote_python or "python3"
                    status, out = host.run(probe_argv(), 60)
                    machine.gpus = parse_probe(out) if status == 0 else GpuFacts()
                if needs_data and (request.data_dir or local_data):
                    self._stage(machine, host, request.data_dir, local_data)

        errors: list[BaseException] = []

        def guarded(machine: Machine) -> None:
            try:
                ready(machine)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, naming the machine
                errors.append(_named(exc, machine.instance.name))

        pool = ThreadPoolExecutor(max_workers=parallelism(len(machines)), thread_name_prefix="make-ready")
        # the image archives sent to the machines go when the stage ends (one machine: streamed)
        with image_archives(len(machines)):
            futures = [pool.submit(guarded, m) for m in machines]
            limit = min(work.remaining(), self.settings.ssh_timeout + self.settings.prepare_timeout)
            done, pending = wait(futures, timeout=max(limit, 0.1))
        pool.shutdown(wait=False, cancel_futures=True)  # a stuck SSH session must not hold the rollback
        if errors:
            raise errors[0]
        if pending:
            raise WaitTimeout(f"{len(pending)} machine(s) not ready (SSH, prepare, data) within {limit:.0f} s "
                              f"({work.what})")

    def _prepare(self, machine: Machine, host: RemoteHost, runtimes: set[str], request: RunRequest) -> None:
        started = time.monotonic()
        # Only the frameworks the request names (their requirements, their images): an image
        # costs about a minute per 2 GB to move to a node.
        prep = prepare(host, host_runtime="host" in runtimes,
                       docker_image=self.settings.docker_image if "docker" in runtimes else None,
                       frameworks=frameworks_needed(request.frameworks, request.suites))
        machine.instance.timings["prepare"] = time.monotonic() - started
        if "host" in runtimes and not prep.host_ready:
            raise ExecutionError(f"{machine.instance.name} cannot run the workloads: {prep.host_reason}")
        machine.python = self.settings.remote_python or prep.python or "python3"
        machine.pythonpath = prep.pythonpath
        machine.pythons = dict(prep.pythons)
        machine.gpus = GpuFacts(count=prep.gpus, engine_passes_gpus=prep.engine_passes_gpus)
        if "docker" in runtimes and not prep.engine:
            machine.skip_docker = (f"container platform skipped on {machine.instance.name}: "
                                   f"{prep.engine_reason or 'no engine with the workload image'}")
        elif "docker" in runtimes:
            machine.framework_skips = {f: f"{why} (on {machine.instance.name})"
                                       for f, why in prep.framework_skips.items()}
        machine.labels.update({"prepared": "; ".join(prep.actions) or "none",
                               "node_image": "yes" if prep.node_image else "no"})
        if prep.missing_tools:
            machine.labels["missing_tools"] = ",".join(prep.missing_tools)
            log.warning("%s lacks %s: suites that need them will fail on it (use the node image, or install "
                        "them in yours)", machine.instance.name, ", ".join(prep.missing_tools))
        log.info("%s prepared in %.1f s: %s", machine.instance.name, machine.instance.timings["prepare"],
                 ", ".join(prep.actions) or "nothing to do (node image)")

    @staticmethod
    def _stage(machine: Machine, host: RemoteHost, user_dir: str | None, local_dir: str | None) -> None:
        if user_dir:
            staged = check_remote_data(host, user_dir)
            machine.data_dir = user_dir
        else:
            remote = remote_dataset_dir(Path(str(local_dir)))
            staged = stage_data(host, Path(str(local_dir)), remote)
            machine.data_dir = remote
        machine.instance.timings["stage_data"] = staged.seconds
        machine.labels.update({"data_files": str(staged.files), "data_bytes": str(staged.bytes)})

    def _targets(self, request: RunRequest, tags: Tags, by_platform: dict[Platform, list[Instance]],
                 machines: list[Machine], key_path: str, known_hosts: str) -> list[Target]:
        s = self.settings
        by_id = {m.instance.id: m for m in machines}
        targets = []
        for platform in request.platforms:
            for inst in self._instances_for(platform, by_platform):
                machine = by_id[inst.id]
                common = dict(address=str(inst.address), port=machine.ssh_port, user=s.ssh_user, key_path=key_path,
                              known_hosts=known_hosts, python=machine.python, pythonpath=machine.pythonpath)
                docker = s.runtime_for(platform) == "docker"
                gpus = allot(s.gpus, machine.gpus, inst.name)
                access = (SSHDocker(image=s.docker_image, gpus=gpus.container, **common) if docker
                          else SSHHost(gpus=gpus.host, pythons=dict(machine.pythons), **common))
                skip = (machine.skip_docker or gpus.container_skip) if docker else gpus.host_skip
                targets.append(Target(
                    name=inst.name, platform=platform, access=access, instance_id=inst.id, address=inst.address,
                    data_dir=machine.data_dir, skip_reason=skip,
                    framework_skips=dict(machine.framework_skips) if docker else {},
                    expires_at=tags.expires_at, timings=dict(inst.timings),
                    labels={"provider": self.driver.name, "run_id": tags.run_id, **machine.labels,
                            "gpus": str(gpus.count),
                            **({HOST_LABEL: str(inst.details[HOST_ID])} if inst.details.get(HOST_ID) else {})}))
        for target in targets:
            for reason in filter(None, (target.skip_reason, *target.framework_skips.values())):
                log.warning("%s: %s", target.platform.value, reason)
        return targets

    # -- teardown -------------------------------------------------------------------------------
    def release(self, request: RunRequest, tags: Tags, targets: list[Target]) -> None:
        try:
            deleted = self.release_by_tag(tags.run_id)
        finally:
            remove_run_state(tags.run_id)
        self.archive_timings(targets, tags.run_id, deleted)


def archive_timings(targets: list[Target], run_id: str, provider: str, deleted: dict[str, float],
                    phases: tuple[str, ...]) -> list[Path]:
    """One ``provisioning`` document per machine into the run's result archive (loaded with it).
    The delete phase is the driver's last phase (e.g. ``undeploy``)."""
    written, seen = [], set()
    delete_phase = phases[-1] if phases else "delete"
    for target in targets:
        if not target.instance_id or target.instance_id in seen:
            continue
        seen.add(target.instance_id)
        timings = dict(target.timings)
        if target.instance_id in deleted:
            timings[delete_phase] = deleted[target.instance_id]
        doc = timings_document(run_id, provider, target.name, target.platform.value, timings, index=len(seen) - 1)
        written.append(Path(archive.publish(run_id, doc.write(archive.archive_path(run_id, doc.job_id)))))
    if written:
        log.info("provisioning timings archived for %d machine(s)", len(written))
    return written
