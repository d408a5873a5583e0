"""TensorFlow's :class:`~dlbench.workloads.training.trainer.Trainer` for the CNN suite: one instance
is :mod:`.tf_train`'s loop, a job across instances :mod:`.tf_cluster`'s roles (parameter servers,
distributed_replicated's TF1 graphs, multi_worker_mirrored), the versions :mod:`..tf_instance`'s.
"""

from __future__ import annotations

from dlbench.workloads.cnn.tf_cluster import run_role
from dlbench.workloads.cnn.tf_train import train
from dlbench.workloads.tf_instance import versions

__all__ = ["run_role", "train", "versions"]
