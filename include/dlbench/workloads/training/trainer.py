"""What every framework's trainer of a training suite offers: the contract, typed.

A trainer is a module (the CNN suite's :mod:`dlbench.workloads.cnn.tf_trainer`, ``torch_trainer``,
``jax_trainer``); the type checker proves each module satisfies :class:`Trainer`
(:mod:`dlbench.workloads.cnn.trainers`), so the suite's command runs any framework the same way:
one instance with :meth:`Trainer.train`, one process of a job across instances with
:meth:`Trainer.run_role`, the document's versions from :meth:`Trainer.versions`.
"""

from __future__ import annotations

from typing import Protocol

from dlbench.workloads.profiles import DataKind, ModelName, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.training.cluster import ClusterRole
from dlbench.workloads.training.measure import StepSummary


class Trainer(Protocol):
    """One framework's trainer (a module: its functions are the protocol's members)."""

    def train(self, doc: ResultDocument, *, model_name: ModelName, spec: TrainingSpec, data: DataKind,
              data_dir: str | None = None, loop: bool = False) -> StepSummary:
        """One instance (every GPU of it), the study's protocol (warm-up, measured steps, the same
        samples and labels in ``doc``); ``loop``: windows of measured steps until SIGTERM (a
        shared-resource background)."""
        ...

    def run_role(self, doc: ResultDocument, role: ClusterRole, *, model_name: ModelName, spec: TrainingSpec,
                 data: DataKind, data_dir: str | None = None) -> None:
        """This process's whole part of a job across instances (a worker trains interruptibly, a
        parameter server serves until SIGTERM), its samples in ``doc``."""
        ...

    def versions(self) -> dict[str, str]:
        """The framework's and its backend's versions, for the document's environment."""
        ...
