"""The ``ironic`` provider: OpenStack bare-metal nodes reached over SSH.

``acquire``: check the cloud and the resource class first (a clear error before anything is
provisioned), make the run's SSH keypair (private key under ``$DLBENCH_HOME/runs/<run>/ssh``,
mode 0600, never in XCom), allocate and deploy nodes for each platform (``bare_metal`` -> the
host runtime; ``container_on_bare_metal`` -> the workload image on the node's Docker engine, on
its own nodes or, with ``share_nodes``, on the bare-metal ones), wait until each is reachable
over SSH, and return :class:`Target` s. On any failure everything tagged with the run is
released before the error propagates (Airflow skips a teardown whose setup failed).

``release``: everything tagged with the run id, found by tag, so it works when ``targets`` is
empty; then the provisioning timings (allocate, deploy, SSH, undeploy) are archived as a result
document per node (suite ``provisioning``) so they reach the warehouse with the run.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from dlbench import paths
from dlbench.config import BenchmarkRequest, IronicSettings
from dlbench.execution.base import SKIP_REASON, Executor, Target
from dlbench.pipeline.providers import ProviderBackend, register
from dlbench.provisioning.base import Instance, Tags
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)

SETTINGS_FILE = "ironic-settings.json"
ROLES = {Platform.BARE_METAL.value: "bm", Platform.CONTAINER_ON_BARE_METAL.value: "cbm"}


def generate_keypair(directory: Path) -> tuple[Path, str]:
    """A fresh ed25519 keypair for the run: (private key path, OpenSSH public key line)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    path = directory / "id_ed25519"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private)
    os.chmod(path, 0o600)
    line = public.decode() + " dlbench"
    path.with_suffix(".pub").write_text(line + "\n")
    return path, line


def provisioner_for(settings: IronicSettings) -> Any:
    """Connection + driver for the settings. Raises CloudConfigError for an unknown cloud or
    missing credentials (before any API call)."""
    from dlbench.hooks.openstack import resolve
    from dlbench.provisioning.ironic import IronicProvisioner, IronicSpec

    spec = resolve(settings.cloud if not settings.conn_id else None, conn_id=settings.conn_id,
                   config_file=settings.clouds_file)
    return IronicProvisioner(spec.connect(), IronicSpec.from_settings(settings))


def node_plan(request: BenchmarkRequest, settings: IronicSettings) -> list[tuple[str, int]]:
    """(platform, new nodes) for every requested platform; refuses platforms Ironic cannot host."""
    plan = []
    for platform in request.platforms:
        if platform.value not in ROLES:
            raise ValueError(f"platforms: {platform.value!r} is not offered by the ironic provider "
                             f"(allowed: {', '.join(ROLES)})")
        shared = (settings.share_nodes and platform is Platform.CONTAINER_ON_BARE_METAL
                  and Platform.BARE_METAL in request.platforms)
        plan.append((platform.value, 0 if shared else settings.node_count(platform.value)))
    return plan


def preflight(request: BenchmarkRequest) -> None:
    """Everything that can be checked without provisioning: platforms, cloud name, credentials,
    enough nodes in the resource class. For the DAG's validate task (acquire repeats it)."""
    settings = request.ironic or IronicSettings()
    plan = node_plan(request, settings)
    provisioner_for(settings).preflight(sum(count for _, count in plan))


@register
class IronicBackend(ProviderBackend):
    name = "ironic"

    def acquire(self, request: BenchmarkRequest, tags: Tags, workdir: Path) -> list[Target]:
        settings = request.ironic or IronicSettings()
        plan = node_plan(request, settings)
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / SETTINGS_FILE).write_text(settings.model_dump_json())
        prov = provisioner_for(settings)
        prov.preflight(sum(count for _, count in plan))
        if settings.ssh_key_path:
            key_path, public = Path(settings.ssh_key_path), Path(settings.ssh_key_path + ".pub").read_text().strip()
        else:
            key_path, public = generate_keypair(workdir / "ssh")
        known_hosts = str(workdir / "ssh" / "known_hosts")
        (workdir / "ssh").mkdir(parents=True, exist_ok=True)
        try:
            by_platform: dict[str, list[Instance]] = {}
            for platform, count in plan:
                if count:
                    by_platform[platform] = prov.create(count, tags, role=ROLES[platform], platform=platform,
                                                        public_key=public,
                                                        user_data=f"#cloud-config\n# dlbench run {tags.run_id}\n")
            every = [inst for insts in by_platform.values() for inst in insts]
            prov.wait(every, settings.deploy_timeout)
            from dlbench.execution.ssh import wait_reachable

            for inst in every:
                inst.details["timings"]["reachable_over_ssh"] = wait_reachable(
                    str(inst.address), settings.ssh_user, str(key_path), settings.ssh_timeout,
                    settings.poll_interval, known_hosts)
            targets = []
            for platform, _count in plan:
                hosts = by_platform.get(platform) or by_platform[Platform.BARE_METAL.value]
                for inst in hosts:
                    targets.append(self._target(inst, platform, settings, key_path, known_hosts))
            return [self._check_docker(t, settings) for t in targets]
        except BaseException as exc:
            log.error("acquire failed (%s: %s); releasing every node tagged with run %s",
                      type(exc).__name__, exc, tags.run_id)
            try:
                prov.release_run(tags.run_id, settings.undeploy_timeout)
            except Exception as cleanup:  # noqa: BLE001 - the janitor retries by tag; keep the first error
                log.error("release after failed acquire incomplete (the janitor will retry): %s", cleanup)
            raise

    @staticmethod
    def _target(inst: Instance, platform: str, settings: IronicSettings, key_path: Path,
                known_hosts: str) -> Target:
        timings = {f"timing_{k}": f"{v:.6f}" for k, v in dict(inst.details.get("timings", {})).items()}
        return Target(
            name=inst.name, platform=platform, runtime=settings.runtime_for(platform), address=inst.address,
            extra={"node_id": inst.id, "allocation_id": str(inst.details.get("allocation_id", "")),
                   "key_path": str(key_path), "known_hosts": known_hosts, "ssh_user": settings.ssh_user,
                   "remote_python": settings.remote_python or sys.executable, "image": settings.docker_image,
                   **timings},
        )

    def _check_docker(self, target: Target, settings: IronicSettings) -> Target:
        """A docker-runtime target without an engine or image on the node is kept but marked, so
        its jobs are recorded as skipped with the reason (never silently missing)."""
        if target.runtime != "docker":
            return target
        from dlbench.execution.shell import command_line
        from dlbench.execution.ssh import SSHExecutor, _client

        probe = command_line(["docker", "image", "inspect", "--format", "ok", settings.docker_image])
        try:
            client = _client(str(target.address), settings.ssh_user, target.extra["key_path"], 30,
                             target.extra["known_hosts"])
            try:
                status, output = SSHExecutor._run(client, probe, 60)
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - becomes the skip reason
            status, output = 1, str(exc)
        if status != 0 or "ok" not in output:
            target.extra[SKIP_REASON] = (f"container platform skipped: no Docker engine with image "
                                         f"{settings.docker_image} on node {target.name}")
        return target

    def release(self, targets: list[Target], tags: Tags, workdir: Path) -> None:
        settings_file = workdir / SETTINGS_FILE
        settings = (IronicSettings.model_validate_json(settings_file.read_text()) if settings_file.exists()
                    else IronicSettings())
        prov = provisioner_for(settings)
        started = time.monotonic()
        released = prov.release_run(tags.run_id, settings.undeploy_timeout)
        log.info("released %d resource(s) of run %s in %.1f s: %s", len(released), tags.run_id,
                 time.monotonic() - started, ", ".join(released) or "(none)")
        archive_timings(targets, tags.run_id, prov.last_undeploy)

    def executor_for(self, target: Target) -> Executor:
        from dlbench.execution.ssh import SSHExecutor

        return SSHExecutor(key_path=target.extra["key_path"], user=target.extra.get("ssh_user", "root"),
                           python=target.extra.get("remote_python", sys.executable),
                           image=target.extra.get("image", "dlbench-workload:latest"),
                           known_hosts=target.extra.get("known_hosts"))


def archive_timings(targets: list[Target], run_id: str, undeploy: dict[str, float]) -> list[Path]:
    """One ``provisioning`` document per node into the run's result archive (loaded with it)."""
    from dlbench.provisioning.timings import timings_document

    written, seen = [], set()
    for target in targets:
        node = target.extra.get("node_id", "")
        if not node or node in seen:
            continue
        seen.add(node)
        timings = {k.removeprefix("timing_"): float(v) for k, v in target.extra.items() if k.startswith("timing_")}
        if node in undeploy:
            timings["undeploy"] = undeploy[node]
        doc = timings_document(run_id, "ironic", target.name, target.platform, timings, index=len(seen) - 1)
        written.append(doc.write(paths.results_dir() / run_id / f"{doc.job_id}.json"))
    if written:
        log.info("provisioning timings archived: %s", json.dumps([str(p) for p in written]))
    return written
