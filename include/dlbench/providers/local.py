"""The embedded ``local`` provider: this host as bare metal, its Docker engine for containers,
QEMU guests on this host for the VM platforms.

No cloud is needed. ``bare_metal`` jobs run as processes on this host;
``container_on_bare_metal`` jobs run in the workload image on the local Docker engine. The VM
platforms (opt-in: the default request has none) go through the same
:class:`~dlbench.providers.machines.MachineBackend` lifecycle as a cloud, with the
:class:`~dlbench.providers.qemu.QemuDriver`: a guest booted from the VM image, reached over
SSH with the run's key, prepared, data staged, released by tag. ``virtual_machine`` runs the
workload in the guest, ``container_on_vm`` on the guest's Docker engine (the same guest when
both are requested).

Whatever cannot run here is still returned as a target with its skip reason, so its jobs are
recorded as skipped (run log, warehouse, report) instead of silently missing: containers
without a Docker engine, VMs without QEMU or the VM image, or a guest that did not boot.
"""

from __future__ import annotations

import logging
import os
from contextlib import AbstractContextManager, nullcontext
from typing import ClassVar, Literal

from pydantic import Field

from dlbench.errors import ConfigError
from dlbench.execution import workload_env
from dlbench.execution.engine import remove_run_containers
from dlbench.execution.gpus import Allotment, allot, local_facts
from dlbench.execution.image import DEFAULT_TAG as WORKLOAD_IMAGE
from dlbench.execution.image import docker_available, ensure_images, frameworks_needed, workload_image
from dlbench.execution.targets import LocalDocker, LocalProcess, SSHDocker, SSHHost, Target
from dlbench.providers.backend import ProviderBackend, RunRequest
from dlbench.providers.base import Tags
from dlbench.providers.datasets import ensure_dataset
from dlbench.providers.machines import MachineBackend
from dlbench.providers.qemu import LocalVMSettings, QemuDriver, sweep_local_vms, vms_dir
from dlbench.providers.settings import ProviderSettings, Runtime
from dlbench.suites import Suite, serving
from dlbench.workloads.environment import nvidia_gpus
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)

VM_PLATFORMS = tuple(LocalVMSettings.platforms)


class LocalSettings(ProviderSettings):
    """The embedded provider: this host as bare metal, its Docker engine for containers, and QEMU
    guests on this host for the VM platforms (opt-in: the default request has none)."""

    name: Literal["local"] = "local"
    platforms: ClassVar[dict[Platform, Runtime]] = {
        Platform.BARE_METAL: "host", Platform.CONTAINER_ON_BARE_METAL: "docker",
        Platform.VIRTUAL_MACHINE: "host", Platform.CONTAINER_ON_VM: "docker"}
    vm: LocalVMSettings = Field(default_factory=lambda: LocalVMSettings(),
                                description="the local VMs (virtual_machine, container_on_vm): QEMU guests")

    def instances_for(self, platform: Platform) -> int | None:
        """This host is shared by design; the VM platforms get their guests (``vm.nodes``)."""
        return self.vm.instances_for(platform) if platform in LocalVMSettings.platforms else None



class LocalBackend(ProviderBackend):
    def __init__(self, settings: LocalSettings | None = None) -> None:
        self.settings = settings or LocalSettings()

    def _vm_backend(self) -> MachineBackend:
        return MachineBackend(self.settings.vm, QemuDriver(self.settings.vm))

    @staticmethod
    def _vm_request(request: RunRequest) -> RunRequest | None:
        """The request restricted to the VM platforms (what the machine lifecycle provisions)."""
        wanted = [p for p in request.platforms if p in VM_PLATFORMS]
        return request.model_copy(update={"platforms": wanted}) if wanted else None

    def preflight(self, request: RunRequest) -> None:
        """Beyond the request model (it refuses platforms this host cannot offer): a serving model
        this host's memory cannot hold, refused naming the profile's field before anything starts.
        A VM platform this host cannot boot is a visible skip at setup, not a refusal: the other
        platforms still run."""
        if Suite.SERVING in request.suites and {Platform.BARE_METAL, Platform.CONTAINER_ON_BARE_METAL} & set(
                request.platforms):
            have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            spec = request.resolved_profile.serving
            if not nvidia_gpus()[0]:  # no GPU here: vLLM's CPU build serves the profile's cpu_model
                spec = spec.on_cpu()
            servers = serving.servers_per_machine(request.resolved_profile, request.scenarios)
            problem = spec.memory_problem(request.profile, have, "this host", servers)
            if problem is not None:
                raise ConfigError(problem)

    def acquire(self, request: RunRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        data_dir = ensure_dataset(request)
        targets: list[Target] = []
        on_host = {Platform.BARE_METAL, Platform.CONTAINER_ON_BARE_METAL} & set(request.platforms)
        gpus = allot(self.settings.gpus, local_facts(), "this host") if on_host else Allotment()
        for platform in request.platforms:
            if platform is Platform.BARE_METAL:
                targets.append(Target(name="localhost", platform=platform, access=LocalProcess(gpus=gpus.host),
                                      data_dir=data_dir, skip_reason=gpus.host_skip, expires_at=tags.expires_at,
                                      framework_skips=self._host_environments(request),
                                      labels={"provider": "local", "gpus": str(gpus.count)}))
            elif platform is Platform.CONTAINER_ON_BARE_METAL:
                targets.append(self._container_target(request, tags, data_dir, gpus))
        vm_request = self._vm_request(request)
        if vm_request is not None:
            targets += self._vm_targets(vm_request, tags, budget_s)
        return targets

    def _vm_targets(self, request: RunRequest, tags: Tags, budget_s: float | None) -> list[Target]:
        """Guests through the machine lifecycle; when they cannot start (no QEMU, no image, a boot
        that failed or timed out), one skipped target per VM platform with the reason. The
        lifecycle has already released whatever it made by then. Interrupts propagate."""
        vm = self.settings.vm
        try:
            if not vm.enabled:
                raise RuntimeError("local VMs are disabled (provider.vm.enabled is false)")
            self._release_dead_guests()
            targets = self._vm_backend().acquire(request, tags, budget_s)
        except Exception as exc:  # noqa: BLE001 - reported as a visible skip, never hidden
            reason = f"VM platform skipped: the local guest did not start: {type(exc).__name__}: {exc}"
            log.warning("%s", reason)
            return [Target(name="local-vm", platform=p, skip_reason=reason[:2000], expires_at=tags.expires_at,
                           access=SSHDocker(address="127.0.0.1", key_path="", image=vm.docker_image)
                           if p is Platform.CONTAINER_ON_VM else SSHHost(address="127.0.0.1", key_path=""),
                           labels={"provider": "local", "driver": "qemu"}) for p in request.platforms]
        for target in targets:
            target.labels.update(provider="local", driver="qemu")
            if target.labels.get("emulated") == "true":
                log.warning("%s on %s is emulated (QEMU %s, no hardware virtualization): its numbers are labelled "
                            "emulated and are not a VM's", target.platform.value, target.name,
                            target.labels.get("accel"))
        return targets

    @staticmethod
    def _release_dead_guests() -> None:
        """Guests of killed runs (lease lapsed or expired) would compete for this host's CPUs:
        released before new ones boot, as the janitor would (runs with a live lease are kept)."""
        actions, _ = sweep_local_vms(lambda _tags: True)
        for action in actions:
            log.warning("released guest %s of run %s left behind: %s", action.name, action.run_id, action.reason)

    @staticmethod
    def _host_environments(request: RunRequest) -> dict[str, str]:
        """This host's workload environments of the frameworks the request needs that the
        controller's interpreter cannot stand in for (vLLM: the serving suite's engine), built
        when missing or stale; one that cannot be built skips only its own jobs, naming the make
        target. (The training frameworks' environment falls back to the controller's interpreter,
        labelled so: :func:`dlbench.execution.workload_env.local`.)"""
        skips: dict[str, str] = {}
        for framework in frameworks_needed(request.frameworks, request.suites):
            venv = workload_env.venv_for(framework)
            if venv is workload_env.TRAINING:
                continue
            try:
                workload_env.build(venv)
            except Exception as exc:  # noqa: BLE001 - a visible skip of those jobs, never hidden
                skips[framework.value] = (f"bare_metal skipped for {framework.value}: the host's environment "
                                          f"{venv.directory} could not be built (make {venv.label}): "
                                          f"{type(exc).__name__}: {exc}"[:2000])
        return skips

    @staticmethod
    def _container_target(request: RunRequest, tags: Tags, data_dir: str | None, gpus: Allotment) -> Target:
        """This host's Docker engine, with the image of every framework the request names built
        (TensorFlow's also for the other suites). A framework whose image cannot be built skips
        only its own jobs, naming the image and ``make image``; no engine skips the platform."""
        skip: str | None = None
        framework_skips: dict[str, str] = {}
        ok, reason = docker_available()
        if not ok:
            skip = f"container platform skipped: {reason}"
        elif gpus.container_skip:
            skip = f"container platform skipped: {gpus.container_skip}"
        else:
            unavailable = ensure_images(frameworks_needed(request.frameworks, request.suites), WORKLOAD_IMAGE)
            framework_skips = {
                f.value: f"container platform skipped for {f.value}: workload image "
                         f"{workload_image(WORKLOAD_IMAGE, f)} unavailable (build it with `make image`): {why}"
                for f, why in unavailable.items()}
        return Target(name="local-docker", platform=Platform.CONTAINER_ON_BARE_METAL,
                      access=LocalDocker(image=WORKLOAD_IMAGE, gpus=gpus.container), data_dir=data_dir,
                      skip_reason=skip, framework_skips=framework_skips, expires_at=tags.expires_at,
                      labels={"provider": "local", "gpus": str(gpus.count)})

    def keep_alive(self, tags: Tags) -> AbstractContextManager[object]:
        """The run's guests' lease, renewed while a task of the run lives (nothing to renew on
        this host otherwise): a SIGKILLed run's guests are released by the janitor."""
        if not vms_dir().is_dir():
            return nullcontext()
        return self._vm_backend().keep_alive(tags)

    def release(self, request: RunRequest, tags: Tags, targets: list[Target]) -> None:
        if docker_available()[0]:
            remove_run_containers(tags.run_id)
        vm_request = self._vm_request(request)
        if vm_request is not None:
            vm_targets = [t for t in targets if t.platform in VM_PLATFORMS and not t.skip_reason]
            self._vm_backend().release(vm_request, tags, vm_targets)
