"""Provider backends: what turns a benchmark request into reachable targets and back.

Two kinds exist: :class:`~dlbench.pipeline.local_backend.LocalBackend` (this host, nothing to
provision) and :class:`~dlbench.pipeline.machines.MachineBackend`, the one machine lifecycle
every cloud provider goes through (its driver fills in the cloud-specific hooks). The DAG's
validate task calls :meth:`ProviderBackend.preflight`, its setup task
:meth:`ProviderBackend.acquire`, its teardown task :meth:`ProviderBackend.release`.
Everything a backend needs comes from the request and the run's tags (both travel in XCom), so
any worker can run any of these steps.
"""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager, nullcontext

from dlbench.config import BenchmarkRequest
from dlbench.execution.targets import Target
from dlbench.provisioning.base import Tags
from dlbench.provisioning.settings import ProviderSettings


class ProviderBackend(abc.ABC):
    @abc.abstractmethod
    def preflight(self, request: BenchmarkRequest) -> None:
        """Everything checkable without provisioning (raises ValueError-like errors naming the field)."""

    @abc.abstractmethod
    def acquire(self, request: BenchmarkRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        """Targets for every requested platform within ``budget_s`` (the setup task's
        execution_timeout, rollback included). Must undo its own partial work (and remove the
        run's key) before raising: Airflow does not run a teardown whose setup failed."""

    def keep_alive(self, tags: Tags) -> AbstractContextManager[object]:
        """Held by every live task of the run: renews the lease on the run's resources."""
        return nullcontext()

    @abc.abstractmethod
    def release(self, request: BenchmarkRequest, tags: Tags, targets: list[Target]) -> None:
        """Release everything of ``tags.run_id``, found by tag (``targets`` may be empty when
        acquire died half-way). Idempotent."""


def backend_for(settings: ProviderSettings) -> ProviderBackend:
    """The backend for a request's provider settings (heavy modules imported lazily)."""
    if settings.name == "local":
        from dlbench.pipeline.local_backend import LocalBackend

        return LocalBackend()
    from dlbench.pipeline.machines import MachineBackend
    from dlbench.provisioning.registry import driver_for

    return MachineBackend(settings, driver_for(settings))  # type: ignore[arg-type]
