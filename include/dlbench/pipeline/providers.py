"""Provider backends: what turns a benchmark request into reachable targets and back.

A backend wraps a :class:`~dlbench.provisioning.base.Provisioner` (or, for ``local``, this
host) and says which :class:`~dlbench.execution.base.Executor` reaches each target. The DAG's
setup task calls :meth:`ProviderBackend.acquire`, its teardown task :meth:`ProviderBackend.release`.
"""

from __future__ import annotations

import abc
from pathlib import Path

from dlbench.config import BenchmarkRequest
from dlbench.execution.base import Executor, Target
from dlbench.provisioning.base import Tags


class ProviderBackend(abc.ABC):
    name: str = ""

    @abc.abstractmethod
    def acquire(self, request: BenchmarkRequest, tags: Tags, workdir: Path) -> list[Target]:
        """Provision targets for every requested platform. Must undo its own partial work
        before raising: Airflow does not run a teardown whose setup failed."""

    @abc.abstractmethod
    def release(self, targets: list[Target], tags: Tags, workdir: Path) -> None:
        """Release everything ``acquire`` made for ``tags.run_id``. Idempotent; runs even when
        ``targets`` is empty (acquire failed half-way) and must then find resources by tag."""

    @abc.abstractmethod
    def executor_for(self, target: Target) -> Executor:
        """The executor that starts workloads on ``target``."""


_BACKENDS: dict[str, type[ProviderBackend]] = {}


def register(cls: type[ProviderBackend]) -> type[ProviderBackend]:
    _BACKENDS[cls.name] = cls
    return cls


def backend(name: str) -> ProviderBackend:
    if name not in _BACKENDS:
        _load_builtin()
    if name not in _BACKENDS:
        raise ValueError(f"unknown provider {name!r}; allowed: {', '.join(sorted(_BACKENDS))}")
    return _BACKENDS[name]()


def _load_builtin() -> None:
    """Import the built-in backends lazily (openstacksdk must not load at DAG parse time)."""
    import importlib

    for module in ("dlbench.pipeline.local_backend", "dlbench.pipeline.ironic_backend"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
