"""What every Fathom workload provides, and the registry that finds one by name.

The runner (:mod:`dlbench.workloads.fathom.runner`) times steps and writes the document; it knows
no model by name. Each workload lives in its own module (``vision``, ``autoenc``, ``deepq``,
``seq2seq``, ``memnet``, ``speech``) that exports ``WORKLOAD``, a :class:`FathomWorkload` made of
its functions; :func:`workload` imports that module only when its model runs, so a
process imports TensorFlow code for one network only.

The contract (one :class:`FathomWorkload` per workload, its fields the module's functions):

- ``build(spec)`` returns ONE ``keras.Model`` whose ``count_params()`` is the workload's parameter
  count (deepq's target network is a copy made by ``train_step``, not counted twice).
- ``expected_parameters(spec)`` is that count written out from the layer sizes (arithmetic, not
  ``count_params``): the runner asserts both agree, so a drift of the architecture fails loudly.
- ``data(spec, batch_size, mode=..., data_dir=..., seed=..., steps=...)`` returns
  :class:`FathomData`: at most ``steps`` batches of the real shapes (a synthetic workload may
  return fewer distinct batches; the runner cycles through them). The runner times the call
  (``data_load_time``). :func:`generated_only` and :func:`find_real` are the two ways a
  workload answers ``mode``.
- ``train_step(net, spec)`` returns a callable ``batch -> loss`` (a scalar tensor): one training
  step with Fathom's optimizer (created inside, once). ``infer_step(net, spec)`` returns a callable
  ``batch -> outputs`` (a tensor or a nest of tensors): the forward pass only, returning what an
  inference delivers (logits, predicted ids, a reconstruction; not a huge intermediate). The
  runner reads all of it back to the host to end each timed step (for training: the loss).
  :mod:`dlbench.workloads.fathom.steps` builds both from a loss or a forward function.
- ``loss_classes``: the number of classes whose chance level (ln of it) scales the loss's
  divergence check (tf_cnn's ``add_loss_samples``); ``None`` for a loss that is not a
  classification cross-entropy (a reconstruction, a TD error): its loss is checked for NaN/inf only.
- ``case_parameters(spec)`` returns the sizes that define the case (the document's parameters,
  beside ``task``, ``batch_size``, ``dataset``, ``data``, ``profile`` the runner adds).
- Throughput is ``batch_size`` samples per step in the workload's ``unit`` (``"images/s"``,
  ``"frames/s"``, ``"sentences/s"``, ...).
- ``spec`` is the workload's own spec class (``FathomSpec.model(name)``) with ``batch_size``
  already set to the run's batch size (``--batch-size`` overrides the profile's), so
  ``spec.batch_size == batch_size`` everywhere.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from dlbench.workloads.profiles import DataKind, DLToolsData, FathomModel
from dlbench.workloads.profiles.fathom import FathomModelSpec

DataMode = DLToolsData
"""``auto`` (the real data set when it is in ``data_dir``, else generated), ``real`` (it must be
there), ``synthetic`` (always generated): the same choice, and the same enum, as dltools'."""

Batch = tuple[Any, ...]
"""One step's inputs and targets (tensors or arrays of the real shapes); what they are is the
workload's business: the runner only passes a batch to the step it got from the same workload."""

TrainStep = Callable[[Batch], Any]
InferStep = Callable[[Batch], Any]


@dataclass(frozen=True)
class FathomData:
    """The batches a run steps through, and where they came from (the document's labels)."""

    batches: Sequence[Batch]
    kind: DataKind
    """``real`` (read from ``data_dir``) or ``synthetic`` (generated of the real shapes)."""
    source: str
    """Where the data came from: the files read, or how it was generated (label ``data_source``)."""


class DataUnavailable(RuntimeError):
    """``--data real`` and the real data set is not in ``data_dir`` (the message says what is
    expected where)."""


Found = TypeVar("Found")


def generated_only(mode: DataMode, why: str) -> None:
    """Refuse ``--data real`` for a workload whose data set this suite never reads (ImageNet, WMT15,
    TIMIT, an Atari emulator): ``why`` names it; ``auto`` and ``synthetic`` generate its shapes."""
    if mode is DataMode.REAL:
        raise DataUnavailable(f"--data real: {why} (docs/fathom.md); use --data auto or synthetic")


def find_real(mode: DataMode, data_dir: Path | None, find: Callable[[Path], Found | None], missing: str,
              where: Callable[[Path], str]) -> Found | None:
    """What ``find`` locates in ``data_dir`` (the real data set's files) unless ``mode`` is
    ``synthetic``; ``None``: generate. ``--data real`` and nothing found: :class:`DataUnavailable`,
    ``missing`` followed by ``where`` the files were expected (dltools' ``auto``/``real`` rule)."""
    found = find(data_dir) if data_dir is not None and mode is not DataMode.SYNTHETIC else None
    if found is None and mode is DataMode.REAL:
        raise DataUnavailable(f"--data real: {missing}{where(data_dir) if data_dir else '(no --data-dir given)'}")
    return found


class DataSource(Protocol):
    """A workload's ``data`` (see the module's docstring)."""

    def __call__(self, spec: Any, batch_size: int, *, mode: DataMode, data_dir: Path | None, seed: int,
                 steps: int) -> FathomData: ...


@dataclass(frozen=True)
class FathomWorkload:
    """One of Fathom's eight workloads (see the module's docstring for the contract): one class for
    all eight, because they differ in what their functions compute, not in how the runner asks."""

    model: FathomModel
    unit: str
    """Throughput's unit: ``"images/s"``, ``"frames/s"``, ``"sentences/s"``, ..."""
    dataset: str
    """The data set Fathom trains it on (parameter ``dataset``): ``imagenet``, ``mnist``, ..."""
    build: Callable[[Any], Any]
    expected_parameters: Callable[[Any], int]
    case_parameters: Callable[[Any], dict[str, Any]]
    """The sizes that define the case (the document's parameters beside batch size and task)."""
    data: DataSource
    train_step: Callable[[Any, Any], TrainStep]
    infer_step: Callable[[Any, Any], InferStep]
    loss_classes: int | None = None


MODULES: dict[FathomModel, str] = {
    FathomModel.SEQ2SEQ: "dlbench.workloads.fathom.seq2seq",
    FathomModel.MEMNET: "dlbench.workloads.fathom.memnet",
    FathomModel.SPEECH: "dlbench.workloads.fathom.speech",
    FathomModel.AUTOENC: "dlbench.workloads.fathom.autoenc",
    FathomModel.RESIDUAL: "dlbench.workloads.fathom.vision",
    FathomModel.VGG: "dlbench.workloads.fathom.vision",
    FathomModel.ALEXNET: "dlbench.workloads.fathom.vision",
    FathomModel.DEEPQ: "dlbench.workloads.fathom.deepq",
}
"""Where each workload lives. A module serving several (``vision``) exports ``WORKLOADS``, a dict
by model; a module serving one exports ``WORKLOAD``."""


def workload(model: FathomModel | str) -> FathomWorkload:
    """The workload of ``model``, its module imported now (it imports TensorFlow)."""
    name = FathomModel(model)
    module = importlib.import_module(MODULES[name])
    several: dict[FathomModel, FathomWorkload] | None = getattr(module, "WORKLOADS", None)
    found: FathomWorkload = several[name] if several is not None else module.WORKLOAD
    if found.model is not name:
        raise AssertionError(f"{MODULES[name]} serves {found.model}, not {name}")
    return found


__all__ = ["Batch", "DataMode", "DataSource", "DataUnavailable", "FathomData", "FathomModelSpec", "FathomWorkload",
           "InferStep", "TrainStep", "find_real", "generated_only", "workload"]
