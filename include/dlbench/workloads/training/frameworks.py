"""The frameworks a training suite runs in: which package each is, which image carries it, and
how a job finds out that its framework is missing (a visible skip naming the image, never a silent
fallback to another framework). Found, not imported: importing a framework takes seconds, and the
suite's own trainer module imports it only when a job runs (:func:`load`). Imports no framework.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any, cast

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


_HIDDEN: set[Framework] = set()
"""The frameworks :func:`isolate` hid from this process (installed, not importable)."""
_JOB_PROCESS = False
"""Whether this process is a job's own (:func:`job_process`): only there are frameworks hidden."""


def job_process() -> None:
    """Mark this process as a job's own (``python -m dlbench.workloads`` calls it first), where
    :func:`isolate` hides frameworks. A caller of the command line in its own process (a test's
    ``cli.main``) shares that process with code that may need every framework: nothing is hidden
    there."""
    global _JOB_PROCESS
    _JOB_PROCESS = True


def installed() -> list[Framework]:
    """The frameworks installed where this process runs (found, not imported: cheap). Recorded in
    each document (label ``frameworks_installed``): a container's says which image it ran (each
    framework's image carries only its own), a node's which image it was deployed from. A framework
    :func:`isolate` hid is installed all the same."""
    return [f for f, package in PACKAGES.items()
            if f in _HIDDEN or importlib.util.find_spec(package) is not None]


def isolate(framework: Framework) -> None:
    """Hide the other training frameworks from this process, before ``framework`` is imported.

    Why: an environment that carries every framework (the node and VM images, this host's workload
    environment) would otherwise charge a job for imports its framework makes only because another
    framework is installed: TensorFlow's Lite converter imports JAX whenever JAX is there (0.5 s of
    CPU at every TensorFlow job's start, 0.7 s of its elapsed time here), while TensorFlow's own
    image has no JAX to import. Hidden, a job costs what it costs in its framework's image, so the
    platforms compare alike. A hidden package raises ``ImportError`` when imported, as an absent one
    does (optional imports like TensorFlow's fall back; a job that really needed it says so).
    Only in a job's own process (:func:`job_process`)."""
    if not _JOB_PROCESS:
        return
    for other, package in PACKAGES.items():
        # only an installed one: a framework this image lacks stays absent (its documents say so)
        if other is not framework and package not in sys.modules and importlib.util.find_spec(package) is not None:
            cast(Any, sys.modules)[package] = None  # None: Python's mark for "not importable"
            _HIDDEN.add(other)


def load(framework: Framework, module: str) -> ModuleType:
    """``module`` (a trainer of ``framework``), imported, the other frameworks hidden
    (:func:`isolate`); :class:`FrameworkMissing` when the framework's package is absent here."""
    isolate(framework)
    try:
        importlib.import_module(PACKAGES[framework])
    except ImportError as exc:
        raise FrameworkMissing(framework, f"{type(exc).__name__}: {exc}") from None
    return importlib.import_module(module)
