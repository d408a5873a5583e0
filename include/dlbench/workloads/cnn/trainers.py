"""Which module trains a ``tf-cnn`` job for each framework, loaded only when a job runs.

One module per framework (:mod:`.tf_trainer`, :mod:`.torch_trainer`, :mod:`.jax_trainer`), each a
:class:`~dlbench.workloads.training.trainer.Trainer`, so the command (:mod:`.main`), the documents
and the controller treat them alike; each imports its own framework only (a test says so). A
framework that is not installed on the benchmarked machine is a visible skip naming the image that
carries it (:class:`~dlbench.workloads.training.frameworks.FrameworkMissing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from dlbench.workloads.profiles import Framework
from dlbench.workloads.training import frameworks
from dlbench.workloads.training.trainer import Trainer

MODULES: dict[Framework, str] = {
    Framework.TENSORFLOW: "dlbench.workloads.cnn.tf_trainer",
    Framework.PYTORCH: "dlbench.workloads.cnn.torch_trainer",
    Framework.JAX: "dlbench.workloads.cnn.jax_trainer",
}
"""Framework -> its trainer module."""

if TYPE_CHECKING:  # the type checker proves each module is a Trainer; at run time none is imported here
    from dlbench.workloads.cnn import jax_trainer, tf_trainer, torch_trainer

    _CHECKED: tuple[Trainer, ...] = (tf_trainer, torch_trainer, jax_trainer)


def trainer(framework: Framework) -> Trainer:
    """The trainer of ``framework``, imported; ``FrameworkMissing`` when its package is absent."""
    return cast(Trainer, frameworks.load(framework, MODULES[framework]))
