"""TensorFlow's :class:`~dlbench.workloads.training.trainer.Trainer` for the CNN suite: one instance
is :mod:`.tf_train`'s loop, a job across instances :mod:`.tf_cluster`'s roles (parameter servers,
distributed_replicated's TF1 graphs, multi_worker_mirrored), the versions :mod:`..tf_instance`'s.
"""

from __future__ import annotations

from dlbench.workloads import tf_instance
from dlbench.workloads.cnn import tf_cluster
from dlbench.workloads.cnn.tf_train import train
from dlbench.workloads.profiles import DataKind, ModelName, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.training.cluster import ClusterRole

__all__ = ["run_role", "train", "versions"]


def run_role(doc: ResultDocument, role: ClusterRole, *, model_name: ModelName, spec: TrainingSpec, data: DataKind,
             data_dir: str | None = None) -> None:
    tf_cluster.run_role(doc, role, model_name=model_name, spec=spec, data=data, data_dir=data_dir)


def versions() -> dict[str, str]:
    return tf_instance.versions()
