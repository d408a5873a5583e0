"""Several providers in one run (Ironic bare metal + Nova VMs) behind one backend."""

from __future__ import annotations

import logging
import time
from contextlib import AbstractContextManager, ExitStack

from dlbench.execution.targets import Target
from dlbench.providers.backend import ProviderBackend, RunRequest
from dlbench.providers.base import Tags
from dlbench.providers.settings import ProviderSettings

log = logging.getLogger(__name__)


class CompositeBackend(ProviderBackend):
    """A run whose platforms come from several providers (Ironic bare metal + Nova VMs): each
    provider's backend gets the request narrowed to its platforms
    (:meth:`RunRequest.for_provider`). Acquired one after the other (they share the run's
    SSH key, made by the first); when one fails, those already acquired are released before the
    error propagates (Airflow skips a teardown whose setup failed). Release always asks every
    provider (by tag), whatever failed before."""

    def __init__(self, parts: list[tuple[ProviderSettings, ProviderBackend]]) -> None:
        self.parts = parts

    def preflight(self, request: RunRequest) -> None:
        for settings, backend in self.parts:
            backend.preflight(request.for_provider(settings))

    def acquire(self, request: RunRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
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

    def release(self, request: RunRequest, tags: Tags, targets: list[Target]) -> None:
        errors = []
        for settings, backend in self.parts:
            mine = [t for t in targets if request.provider_for(t.platform) is settings]
            try:
                backend.release(request.for_provider(settings), tags, mine)
            except Exception as exc:  # noqa: BLE001 - release every provider, then report
                errors.append(f"{settings.name}: {exc}")
        if errors:
            raise RuntimeError("release incomplete: " + "; ".join(errors))
