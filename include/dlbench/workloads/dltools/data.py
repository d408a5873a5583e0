"""Training data of study 001's DL-tool set: the real data sets when the user provides them, else
data of their real shapes, generated.

Real data is read from a directory (``--data-dir``), in the formats the data sets are published in
(layout: docs/dltools.md):

- MNIST: ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte`` (idx files, optionally ``.gz``),
  in the directory itself or in ``mnist/`` or ``MNIST_data/``;
- CIFAR-10: ``cifar-10-batches-py/data_batch_1..5`` (the python pickle batches) or
  ``cifar-10-batches-bin/data_batch_1..5.bin`` (the binary version), in the directory or ``cifar10/``;
- PTB: ``ptb.train.txt`` (word level, as in Mikolov's ``simple-examples/data``), in the directory,
  ``ptb/`` or ``simple-examples/data/``.

Generated data has the real shapes (28x28 grey or 32x32x3 uint8 images with 10 classes; word ids of a
10000-word vocabulary) and the real training-set sizes (60000, 50000 images, 929589 words), or the
part of them that a shorter epoch (``batches_per_epoch``) reads.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlbench.workloads.profiles import DLTOOLS_TRAIN_EXAMPLES, LSTM_SEQUENCE_LENGTH, DLToolModel, DLToolsData

DATA_MODES = tuple(mode.value for mode in DLToolsData)
"""auto: the real data set when it is in the data directory, else generated; real: it must be there."""

MNIST_DIRS = ("", "mnist", "MNIST_data")
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
CIFAR_DIRS = ("", "cifar10")
CIFAR_BATCHES = 5
PTB_PATHS = ("ptb.train.txt", "ptb/ptb.train.txt", "simple-examples/data/ptb.train.txt")
PTB_VOCABULARY = 10000
EOS = "<eos>"


@dataclass
class TrainingData:
    """What a run trains on: ``inputs`` are images (N, H, W[, C]) uint8 with ``labels`` (N,), or PTB
    word ids (T,) int32 with no labels (the targets are the next words)."""

    kind: str  # "real" | "synthetic"
    source: str  # the files read, or "generated"
    inputs: Any
    labels: Any | None
    examples: int  # images, or words
    load_seconds: float = 0.0
    notes: dict[str, str] = field(default_factory=dict)


def dataset_name(model: DLToolModel | str) -> str:
    return {
        DLToolModel.FCN5: "mnist",
        DLToolModel.ALEXNET: "cifar10",
        DLToolModel.RESNET50: "cifar10",
        DLToolModel.LSTM: "ptb",
    }[DLToolModel(model)]


def expected_layout(model: DLToolModel | str, data_dir: str | os.PathLike[str]) -> str:
    """Where the real data set of ``model`` is looked for (for error messages)."""
    base = Path(data_dir)
    name = dataset_name(model)
    if name == "mnist":
        return (
            " or ".join(str(base / d / f"{MNIST_FILES[0]}[.gz]") for d in MNIST_DIRS)
            + f" (+ {MNIST_FILES[1]}[.gz] beside it)"
        )
    if name == "cifar10":
        return " or ".join(
            f"{base / d / 'cifar-10-batches-py'}/data_batch_1..5, "
            f"{base / d / 'cifar-10-batches-bin'}/data_batch_1..5.bin"
            for d in CIFAR_DIRS
        )
    return " or ".join(str(base / p) for p in PTB_PATHS)


# --- finding the files ------------------------------------------------------------------------


def _maybe_gz(path: Path) -> Path | None:
    for candidate in (path, path.with_name(path.name + ".gz")):
        if candidate.is_file():
            return candidate
    return None


def find_mnist(data_dir: str | os.PathLike[str]) -> tuple[Path, Path] | None:
    for sub in MNIST_DIRS:
        images, labels = (_maybe_gz(Path(data_dir) / sub / name) for name in MNIST_FILES)
        if images and labels:
            return images, labels
    return None


def find_cifar10(data_dir: str | os.PathLike[str]) -> tuple[str, list[Path]] | None:
    """("py" | "bin", the training batches present, at least data_batch_1)."""
    for sub in CIFAR_DIRS:
        base = Path(data_dir) / sub
        for fmt, folder, suffix in (("py", "cifar-10-batches-py", ""), ("bin", "cifar-10-batches-bin", ".bin")):
            files = [base / folder / f"data_batch_{i}{suffix}" for i in range(1, CIFAR_BATCHES + 1)]
            present = [f for f in files if f.is_file()]
            if present and present[0] == files[0]:
                return fmt, present
    return None


def find_ptb(data_dir: str | os.PathLike[str]) -> Path | None:
    for relative in PTB_PATHS:
        path = Path(data_dir) / relative
        if path.is_file():
            return path
    return None


# --- reading the published formats -----------------------------------------------------------


def read_idx(path: str | os.PathLike[str]) -> Any:
    """An idx file (MNIST's format): 2 zero bytes, a type byte (0x08 = uint8), the number of
    dimensions, each dimension as a big-endian uint32, then the data."""
    import numpy as np  # heavy: only generating or reading data needs numpy

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        raw = handle.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an idx file of unsigned bytes (magic {raw[:4].hex()})")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    expected = int(np.prod(dims))
    if data.size != expected:
        raise ValueError(f"{path}: header says {dims} ({expected} bytes), file has {data.size}")
    return data.reshape(dims)


def read_mnist(images_path: Path, labels_path: Path) -> tuple[Any, Any]:
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ValueError(f"{images_path}: MNIST images are N x 28 x 28, got {images.shape}")
    if labels.shape != (images.shape[0],):
        raise ValueError(f"{labels_path}: {labels.shape[0]} labels for {images.shape[0]} images")
    return images, labels.astype("int32")


def read_cifar10(fmt: str, files: list[Path]) -> tuple[Any, Any]:
    """The python batches (a pickled dict: b"data" N x 3072 uint8, channel planes, b"labels") or the
    binary ones (records of 1 label byte + 3072 pixel bytes) -> N x 32 x 32 x 3 images, labels."""
    import numpy as np  # heavy: only generating or reading data needs numpy

    images, labels = [], []
    for path in files:
        if fmt == "py":
            with open(path, "rb") as handle:
                batch = pickle.load(handle, encoding="bytes")  # noqa: S301 - the published format is a pickle
            data = np.asarray(batch[b"data"], dtype=np.uint8)
            images.append(data.reshape(-1, 3, 32, 32))
            labels.append(np.asarray(batch[b"labels"], dtype=np.int32))
        else:
            raw = np.fromfile(path, dtype=np.uint8)
            if raw.size % 3073:
                raise ValueError(f"{path}: not CIFAR-10 binary records of 3073 bytes ({raw.size} bytes)")
            records = raw.reshape(-1, 3073)
            labels.append(records[:, 0].astype(np.int32))
            images.append(records[:, 1:].reshape(-1, 3, 32, 32))
    out = np.concatenate(images).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(out), np.concatenate(labels)


def read_ptb_words(path: Path, vocabulary: int = PTB_VOCABULARY) -> tuple[Any, int]:
    """Word ids of ptb.train.txt as the PTB reader builds them: every line ends with <eos>, ids by
    decreasing frequency (ties alphabetical). The model's vocabulary is 10000 (the PTB's)."""
    import numpy as np  # heavy: only generating or reading data needs numpy

    words = path.read_text(encoding="utf-8").replace("\n", f" {EOS} ").split()
    counts = Counter(words)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if len(ranked) > vocabulary:
        raise ValueError(
            f"{path}: {len(ranked)} distinct words; the model's vocabulary is {vocabulary} "
            "(the Penn Treebank's, as preprocessed by Mikolov)"
        )
    ids = {word: i for i, (word, _) in enumerate(ranked)}
    return np.fromiter((ids[w] for w in words), dtype=np.int32, count=len(words)), len(ranked)


# --- what a run trains on --------------------------------------------------------------------


def examples_needed(model: DLToolModel, batch_size: int, batches_per_epoch: int | None) -> int | None:
    """Examples one epoch of ``batches_per_epoch`` reads (None: the whole training set)."""
    if batches_per_epoch is None:
        return None
    if model is DLToolModel.LSTM:
        return batch_size * (batches_per_epoch * LSTM_SEQUENCE_LENGTH + 1)
    return batch_size * batches_per_epoch


def load(
    model: DLToolModel | str,
    *,
    mode: str = "auto",
    data_dir: str | os.PathLike[str] | None = None,
    batch_size: int,
    batches_per_epoch: int | None = None,
    seed: int = 0,
) -> TrainingData:
    """The real data set of ``model`` from ``data_dir`` (``mode`` auto or real), else generated data of
    its shapes (``mode`` synthetic, or auto without the files). A shorter epoch keeps only what it
    reads, so every epoch passes over the same examples."""
    model = DLToolModel(model)
    if mode not in DATA_MODES:
        raise ValueError(f"data mode {mode!r}: one of {', '.join(DATA_MODES)}")
    start = time.perf_counter()
    needed = examples_needed(model, batch_size, batches_per_epoch)
    data = None
    if mode != "synthetic" and data_dir:
        data = _read_real(model, data_dir)
    if data is None:
        if mode == "real":
            where = expected_layout(model, data_dir) if data_dir else "(no --data-dir given)"
            raise FileNotFoundError(f"--data real: no {dataset_name(model)} training set found; expected {where}")
        data = _generate(model, needed, seed)
        if mode == "auto":
            data.notes["data_fallback"] = f"no {dataset_name(model)} in {data_dir}" if data_dir else "no --data-dir"
    elif needed is not None and needed < data.examples:
        data.inputs = data.inputs[:needed]
        data.labels = None if data.labels is None else data.labels[:needed]
        data.notes["data_subset"] = f"first {needed} of {data.examples}"
        data.examples = needed
    data.load_seconds = time.perf_counter() - start
    return data


def _read_real(model: DLToolModel, data_dir: str | os.PathLike[str]) -> TrainingData | None:
    name = dataset_name(model)
    if name == "mnist":
        found = find_mnist(data_dir)
        if found is None:
            return None
        images, labels = read_mnist(*found)
        return TrainingData("real", ",".join(str(p) for p in found), images, labels, int(images.shape[0]))
    if name == "cifar10":
        cifar = find_cifar10(data_dir)
        if cifar is None:
            return None
        images, labels = read_cifar10(*cifar)
        return TrainingData(
            "real",
            ",".join(str(p) for p in cifar[1]),
            images,
            labels,
            int(images.shape[0]),
            notes={"cifar_format": cifar[0]},
        )
    path = find_ptb(data_dir)
    if path is None:
        return None
    ids, vocabulary = read_ptb_words(path)
    return TrainingData("real", str(path), ids, None, int(ids.shape[0]), notes={"ptb_vocabulary": str(vocabulary)})


def _generate(model: DLToolModel, needed: int | None, seed: int) -> TrainingData:
    import numpy as np  # heavy: only generating or reading data needs numpy

    rng = np.random.default_rng(seed)
    examples = DLTOOLS_TRAIN_EXAMPLES[model] if needed is None else min(needed, DLTOOLS_TRAIN_EXAMPLES[model])
    if model is DLToolModel.LSTM:
        ids = rng.integers(0, PTB_VOCABULARY, size=examples, dtype=np.int32)
        return TrainingData("synthetic", "generated", ids, None, examples)
    shape = (28, 28) if model is DLToolModel.FCN5 else (32, 32, 3)
    images = rng.integers(0, 256, size=(examples, *shape), dtype=np.uint8)
    labels = rng.integers(0, 10, size=examples, dtype=np.int32)
    return TrainingData("synthetic", "generated", images, labels, examples)
