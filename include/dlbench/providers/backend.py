"""Provider backends: what turns a benchmark request into reachable targets and back.

Two kinds exist: :class:`~dlbench.providers.local.LocalBackend` (this host, nothing to
provision) and :class:`~dlbench.providers.machines.MachineBackend`, the one machine lifecycle
every cloud provider goes through (its driver fills in the cloud-specific hooks). The DAG's
validate task calls :meth:`ProviderBackend.preflight`, its setup task
:meth:`ProviderBackend.acquire`, its teardown task :meth:`ProviderBackend.release`.
Everything a backend needs comes from the request and the run's tags (both travel in XCom), so
any worker can run any of these steps.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol, Self

from dlbench.execution.targets import Target
from dlbench.providers.base import Tags
from dlbench.providers.settings import ProviderSettings
from dlbench.suites import Suite
from dlbench.workloads.profiles import DataKind, Framework, Profile, Scenario
from dlbench.workloads.result import Platform


class RunRequest(Protocol):
    """What a provider reads of a benchmark request. :class:`dlbench.request.RunRequest`
    satisfies it; providers name this instead because the request sits above them (it names every
    provider's settings model through :mod:`dlbench.providers.registry`)."""

    @property
    def providers(self) -> Sequence[ProviderSettings]: ...
    @property
    def platforms(self) -> Sequence[Platform]: ...
    @property
    def suites(self) -> Sequence[Suite]: ...
    @property
    def data(self) -> Sequence[DataKind]: ...
    @property
    def frameworks(self) -> Sequence[Framework]: ...
    @property
    def scenarios(self) -> Sequence[Scenario]: ...
    @property
    def profile(self) -> str: ...
    @property
    def resolved_profile(self) -> Profile: ...
    @property
    def data_dir(self) -> str | None: ...
    @property
    def needs_data_set(self) -> bool: ...

    def provider_for(self, platform: Platform) -> ProviderSettings: ...
    def for_provider(self, settings: ProviderSettings) -> RunRequest: ...
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self: ...


class ProviderBackend(abc.ABC):
    @abc.abstractmethod
    def preflight(self, request: RunRequest) -> None:
        """Everything checkable without provisioning (raises ValueError-like errors naming the field)."""

    @abc.abstractmethod
    def acquire(self, request: RunRequest, tags: Tags, budget_s: float | None = None) -> list[Target]:
        """Targets for every requested platform within ``budget_s`` (the setup task's
        execution_timeout, rollback included). Must undo its own partial work (and remove the
        run's key) before raising: Airflow does not run a teardown whose setup failed."""

    def keep_alive(self, tags: Tags) -> AbstractContextManager[object]:
        """Held by every live task of the run: renews the lease on the run's resources."""
        return nullcontext()

    @abc.abstractmethod
    def release(self, request: RunRequest, tags: Tags, targets: list[Target]) -> None:
        """Release everything of ``tags.run_id``, found by tag (``targets`` may be empty when
        acquire died half-way). Idempotent."""
