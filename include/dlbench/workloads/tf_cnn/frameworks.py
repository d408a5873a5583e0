"""Which module trains a ``tf_cnn`` job for each framework, loaded only when a job runs.

Every framework's trainer offers the same three functions, so the command (:mod:`.main`), the
documents and the controller treat them alike:

- ``train(doc, *, model_name, spec, data, data_dir, loop=False) -> StepSummary``: one instance
  (every GPU of it), the study's protocol: warm-up, measured steps, the same samples and labels;
- ``train_distributed(doc, role, *, model_name, spec, data, data_dir) -> StepSummary``: one
  worker of a job across instances (:class:`~dlbench.workloads.tf_cnn.distributed.ClusterRole`);
- ``versions() -> dict[str, str]``: the framework's and its backend's versions for the document.

A framework that is not installed on the benchmarked machine is a visible skip naming the image
that carries it (:class:`FrameworkMissing`), never a silent fallback to another framework.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from dlbench.workloads.profiles import Framework

MODULES: dict[Framework, str] = {
    Framework.TENSORFLOW: "dlbench.workloads.tf_cnn.runner",
    Framework.PYTORCH: "dlbench.workloads.tf_cnn.torch_runner",
    Framework.JAX: "dlbench.workloads.tf_cnn.jax_runner",
}
"""Framework -> its trainer module."""

PACKAGES: dict[Framework, str] = {Framework.TENSORFLOW: "tensorflow", Framework.PYTORCH: "torch",
                                  Framework.JAX: "jax"}
"""The package whose absence means the framework is not installed on this machine."""

IMAGES: dict[Framework, str] = {
    Framework.TENSORFLOW: "dlbench-workload (make image) or the dlbench node image (make node-image)",
    Framework.PYTORCH: "dlbench-workload-pytorch (make image) or the dlbench node image (make node-image)",
    Framework.JAX: "dlbench-workload-jax (make image) or the dlbench node image (make node-image)",
}
"""Where each framework is installed: what a skip tells the user to run on."""

SKIP_PREFIX = "framework not available: "
"""How a missing-framework skip's reason begins (the report groups skips by cause)."""


class FrameworkMissing(RuntimeError):
    """The framework's package cannot be imported here; the message names the image to use."""

    def __init__(self, framework: Framework, detail: str) -> None:
        super().__init__(f"{SKIP_PREFIX}{framework.value} is not installed on this machine ({detail}); "
                         f"run it with {IMAGES[framework]}")
        self.framework = framework


def installed() -> list[Framework]:
    """The frameworks installed where this process runs (found, not imported: cheap). Recorded in
    each document (label ``frameworks_installed``): a container's says which image it ran (each
    framework's image carries only its own), a node's which image it was deployed from."""
    return [f for f in Framework if importlib.util.find_spec(PACKAGES[f]) is not None]


def trainer(framework: Framework) -> ModuleType:
    """The trainer module of ``framework``; :class:`FrameworkMissing` when its package is absent."""
    try:
        importlib.import_module(PACKAGES[framework])
    except ImportError as exc:
        raise FrameworkMissing(framework, f"{type(exc).__name__}: {exc}") from None
    return importlib.import_module(MODULES[framework])
