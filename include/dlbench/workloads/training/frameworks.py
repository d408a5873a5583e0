"""The frameworks a training suite runs in: which package each is, which image carries it, and
how a job finds out that its framework is missing (a visible skip naming the image, never a silent
fallback to another framework). Found, not imported: importing a framework takes seconds, and the
suite's own trainer module imports it only when a job runs (:func:`load`). Imports no framework.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from dlbench.workloads.profiles import Framework

PACKAGES: dict[Framework, str] = {Framework.TENSORFLOW: "tensorflow", Framework.PYTORCH: "torch",
                                  Framework.JAX: "jax"}
"""The package whose absence means the training framework is not installed on this machine."""

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
    return [f for f, package in PACKAGES.items() if importlib.util.find_spec(package) is not None]


def load(framework: Framework, module: str) -> ModuleType:
    """``module`` (a trainer of ``framework``), imported; :class:`FrameworkMissing` when the
    framework's package is absent here."""
    try:
        importlib.import_module(PACKAGES[framework])
    except ImportError as exc:
        raise FrameworkMissing(framework, f"{type(exc).__name__}: {exc}") from None
    return importlib.import_module(module)
