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
import logging
import time
from contextlib import AbstractContextManager, ExitStack, nullcontext

from dlbench.config import BenchmarkRequest
from dlbench.execution.targets import Target
from dlbench.provisioning.base import Tags
from dlbench.provisioning.settings import ProviderSettings

log = logging.getLogger(__name__)


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


class CompositeBackend(ProviderBackend):
    """A run whose platforms come from several providers (Ironic bare metal + Nova VMs): each
    provider's backend gets the request narrowed to its platforms
    (:meth:`BenchmarkRequest.for_provider`). Acquired one after the other (they share the run's
    SSH key, made by the first); when one fails, those already acquired are released before the
    error propagates (Airflow skips a teardown whose setup failed). Release always asks every
    provider (by tag), whatever failed before."""

    def __init__(self, request: BenchmarkRequest) -> None:
        self.parts = [(settings, backend_for(settings)) for settings in request.providers]

    def preflight(self, request: BenchmarkRequest) -> None:
        for settings, backend in self.parts:
            backend.preflight(request.for_provider(settings))

    def acquire(self, request: BenchmarkRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        started = time.monotonic()
        targets: list[Target] = []
        done: list[tuple[ProviderSettings, ProviderBackend]] = []
        try:
            for settings, backend in self.parts:
                left = None if budget_s is None else max(budget_s - (time.monotonic() - started), 1.0)
                targets += backend.acquire(request.for_provider(settings), tags, left)
                done.append((settings, backend))
        except BaseException:
            for settings, backend in done:
                try:
                    backend.release(request.for_provider(settings), tags, [])
                except Exception as exc:  # noqa: BLE001 - the janitor retries by tag; keep the first error
                    log.error("release of %s after a failed acquire incomplete: %s", settings.name, exc)
            raise
        return targets

    def keep_alive(self, tags: Tags) -> AbstractContextManager[object]:
        stack = ExitStack()
        for _, backend in self.parts:
            stack.enter_context(backend.keep_alive(tags))
        return stack

    def release(self, request: BenchmarkRequest, tags: Tags, targets: list[Target]) -> None:
        errors = []
        for settings, backend in self.parts:
            mine = [t for t in targets if request.provider_for(t.platform) is settings]
            try:
                backend.release(request.for_provider(settings), tags, mine)
            except Exception as exc:  # noqa: BLE001 - release every provider, then report
                errors.append(f"{settings.name}: {exc}")
        if errors:
            raise RuntimeError("release incomplete: " + "; ".join(errors))


def backend_for_request(request: BenchmarkRequest) -> ProviderBackend:
    """The backend of a run: its provider's, or a :class:`CompositeBackend` over several."""
    if len(request.providers) == 1:
        return backend_for(request.providers[0])
    return CompositeBackend(request)


def backend_for(settings: ProviderSettings) -> ProviderBackend:
    """The backend for a request's provider settings (heavy modules imported lazily)."""
    if settings.name == "local":
        from dlbench.pipeline.local_backend import LocalBackend

        return LocalBackend(settings)  # type: ignore[arg-type]
    if settings.name == "kubernetes":
        from dlbench.pipeline.kubernetes_backend import KubernetesBackend

        return KubernetesBackend(settings)  # type: ignore[arg-type]
    if settings.name == "magnum":
        from dlbench.pipeline.magnum_backend import MagnumBackend

        return MagnumBackend(settings)  # type: ignore[arg-type]
    from dlbench.pipeline.machines import MachineBackend
    from dlbench.provisioning.registry import driver_for

    return MachineBackend(settings, driver_for(settings))  # type: ignore[arg-type]
