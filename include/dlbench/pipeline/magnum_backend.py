"""The ``magnum`` provider's backend: a Kubernetes cluster made per run, then the Kubernetes
backend on it (docs/magnum.md).

acquire: :meth:`MagnumDriver.preflight` -> ``create`` (one cluster, ``node_count`` = the
platform's nodes) -> ``wait_ready`` (CREATE_COMPLETE, or CREATE_FAILED with Magnum's reason) ->
kubeconfig kept as a run secret (pipeline/run_secrets.py: like the run's SSH key, never a file on
a worker's disk between tasks; a 0600 private file only while a task uses it) -> the cluster's API
answers -> the
:class:`~dlbench.pipeline.kubernetes_backend.KubernetesBackend` on that kubeconfig makes the run's
namespace and one :class:`~dlbench.execution.targets.KubernetesAccess` target per node. Any failure
deletes the cluster (and the kubeconfig) before it propagates. release: the run's namespace, then
every cluster of the run found by its labels (deleted, waited until gone), timings archived, the
kubeconfig removed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dlbench.config import BenchmarkRequest
from dlbench.execution.targets import Target
from dlbench.pipeline import run_secrets
from dlbench.pipeline.providers import ProviderBackend
from dlbench.provisioning.base import Demand, Tags
from dlbench.provisioning.magnum import MagnumDriver, MagnumSettings
from dlbench.provisioning.polling import Deadline
from dlbench.workloads.result import Platform

log = logging.getLogger(__name__)


KUBECONFIG_SECRET = "kubeconfig-"
"""Run secret name prefix of a cluster's kubeconfig (a client key and certificate: a secret, kept
like the run's SSH key, never a file on a worker's disk between tasks; docs/storage.md)."""


def kubeconfig_secret(cluster_id: str) -> str:
    """By the cluster's UUID: its name repeats the run id, which the secret's key already holds
    (and secret names are short)."""
    return f"{KUBECONFIG_SECRET}{cluster_id}"


@contextlib.contextmanager
def _kubeconfigs(run_id: str) -> Iterator[list[Path]]:
    """Every kubeconfig of the run's clusters as 0600 files for the ``with`` block only."""
    from dlbench.pipeline import run_secrets

    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(run_secrets.secret_file(run_id, name))
               for name in run_secrets.secret_names(run_id) if name.startswith(KUBECONFIG_SECRET)]


class MagnumBackend(ProviderBackend):
    def __init__(self, settings: MagnumSettings, driver: MagnumDriver | None = None) -> None:
        self.settings = settings
        self.driver = driver or MagnumDriver(settings)

    def _demands(self, request: BenchmarkRequest) -> list[Demand]:
        platform = Platform(self.settings.platform)
        other = [p.value for p in request.platforms if p in self.settings.platforms and p != platform]
        if other:
            raise ValueError(f"magnum.platform: this provider's cluster is {self.settings.platform}; "
                             f"platforms {other} need another provider")
        if platform not in request.platforms:
            return []
        return [Demand(role="k8s", platform=platform.value, count=self.settings.node_count(platform))]

    def preflight(self, request: BenchmarkRequest) -> None:
        demands = self._demands(request)
        if demands:
            self.driver.preflight(demands)

    def _k8s(self, kubeconfig: Path) -> Any:
        from dlbench.pipeline.kubernetes_backend import KubernetesBackend
        from dlbench.provisioning.kubernetes import KubernetesSettings

        s = self.settings
        k8s = KubernetesSettings(
            platform=s.platform, kubeconfig=str(kubeconfig), namespace_prefix=s.namespace_prefix,
            docker_image=s.docker_image, image_pull_policy=s.image_pull_policy, cpus=s.cpus, memory=s.memory,
            lease_minutes=s.lease_minutes, gpus=s.gpus, expiry_hours=s.expiry_hours)
        return KubernetesBackend(k8s)

    def acquire(self, request: BenchmarkRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        demands = self._demands(request)
        if not demands:
            return []
        s = self.settings
        total = min(s.ready_timeout + s.api_timeout, budget_s) if budget_s else s.ready_timeout + s.api_timeout
        deadline = Deadline(max(total - min(s.release_timeout, total / 4), 1.0), "Magnum cluster")
        try:
            self.driver.preflight(demands)
            instances = self.driver.create(demands[0], tags, _no_boot(), deadline)
            self.driver.wait_ready(instances, deadline)
            cluster = instances[0]
            with run_secrets.private_dir(tags.run_id) as directory:
                path = directory / "kubeconfig"
                self.driver.write_kubeconfig(cluster, path)
                secret = run_secrets.put_secret(tags.run_id, kubeconfig_secret(cluster.id), path.read_text())
                self.driver.wait_api(cluster, path, Deadline(max(min(s.api_timeout, deadline.remaining()), 1.0),
                                                             "Kubernetes API"))
                targets = [t.model_copy(update={"access": t.access.model_copy(update={"kubeconfig": secret})})
                           for t in self._k8s(path).acquire(request, tags)]
        except BaseException:
            with contextlib.suppress(Exception):
                self.release(request, tags, [])
            raise
        out = []
        for target in targets:
            labels = {**target.labels, "provider": "magnum", "magnum_cluster": cluster.name,
                      "magnum_cluster_id": cluster.id, "magnum_template": str(cluster.details.get("template", ""))}
            out.append(target.model_copy(update={"labels": labels, "timings": {**target.timings, **cluster.timings}}))
        log.info("Magnum cluster %s ready: %s", cluster.name, cluster.timings)
        return out

    @contextlib.contextmanager
    def keep_alive(self, tags: Tags) -> Iterator[object]:
        """The run's namespace lease renewed while a task lives, through the first cluster's
        kubeconfig (a private file for that task's duration)."""
        with _kubeconfigs(tags.run_id) as paths:
            if not paths:
                yield None
                return
            with self._k8s(paths[0]).keep_alive(tags) as alive:
                yield alive

    def release(self, request: BenchmarkRequest, tags: Tags, targets: list[Target]) -> None:
        from dlbench.pipeline.machines import archive_timings

        errors = []
        try:
            with _kubeconfigs(tags.run_id) as paths:
                for path in paths:
                    try:  # the namespace first (its jobs' containers go with it); the cluster goes anyway
                        from dlbench.pipeline.kubernetes_backend import delete_run

                        delete_run(self._k8s(path).api, tags.run_id)
                    except Exception as exc:  # noqa: BLE001 - the cluster's deletion removes it too
                        log.warning("namespace of run %s on %s: %s", tags.run_id, path.name, exc)
        except KeyError as exc:  # a secret already gone: the clusters are deleted by tag below anyway
            log.warning("run %s: %s", tags.run_id, exc)
        started = time.monotonic()
        try:
            found = self.driver.find(tags.run_id).get(tags.run_id, [])
            deleted = self.driver.delete(found, Deadline(self.settings.release_timeout, "Magnum cluster delete"))
        except Exception as exc:  # noqa: BLE001 - the kubeconfig still goes; the janitor retries by label
            errors.append(str(exc))
            deleted = {}
        for name in run_secrets.secret_names(tags.run_id):
            if name.startswith(KUBECONFIG_SECRET):
                run_secrets.delete_secret(tags.run_id, name)
        per_cluster = {t.labels["magnum_cluster_id"]: t for t in targets if t.labels.get("magnum_cluster_id")}
        if per_cluster:  # one provisioning document per cluster (its timings are the cluster's)
            archive_timings([t.model_copy(update={"instance_id": cid, "name": t.labels["magnum_cluster"]})
                             for cid, t in per_cluster.items()], tags.run_id, "magnum", deleted,
                            self.driver.timing_phases)
        log.info("Magnum release of run %s: %d cluster(s) in %.1f s", tags.run_id, len(deleted),
                 time.monotonic() - started)
        if errors:
            raise RuntimeError("Magnum release incomplete: " + "; ".join(errors))


def _no_boot() -> Any:
    from dlbench.provisioning.base import BootConfig

    return BootConfig(public_key="")


__all__ = ["MagnumBackend", "kubeconfig_secret"]
