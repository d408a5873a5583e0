"""ImageNet-format TFRecords read without TensorFlow, for the PyTorch and JAX runners.

The TensorFlow runner reads ``data_dir`` with ``tf.data`` (:func:`.tf_data.real_dataset`); the other
frameworks read the very same files (the staged demo set, users' ImageNet shards) with this module,
so every framework trains on the same data. A PyTorch or JAX image need not carry TensorFlow for it.

* Framing (``tensorflow/core/lib/io/record_writer.cc``): per record a little-endian uint64 length,
  the masked CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data. The length's CRC
  is always checked (a truncated or misaligned file fails at once instead of yielding garbage);
  the data's CRC only with ``verify_data=True``: a CRC-32C in pure Python (the standard library has
  only zlib's CRC-32) costs about as much CPU as decoding the JPEG, under the GIL, so checking every
  record of a training run would slow the input pipeline it is meant to feed.
* ``tf.train.Example`` (``example.proto``, ``feature.proto``) parsed by hand from the protobuf wire
  format: the ``image/encoded`` bytes and the ``image/class/label`` int64, nothing else.
* Decoding as :func:`data.real_dataset` does: JPEG to RGB (Pillow), bilinear resize to
  ``image_size``, float32 / 255, NHWC; a label outside ``[0, num_classes)`` is a dataset/profile
  mismatch and fails loudly.
"""

from __future__ import annotations

import io
import os
import queue
import random
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from PIL import Image

from dlbench.workloads.cnn.shards import TFRECORD_PATTERN, tfrecord_files

__all__ = ["TFRECORD_PATTERN", "RecordError", "batches", "crc32c", "decode", "parse_example", "read_records"]

_CASTAGNOLI = 0x82F63B78  # CRC-32C polynomial, reflected


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _CASTAGNOLI if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), what TFRecord framing uses."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC: rotate right by 15 bits, add a constant (crc32c.h ``Mask``)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class RecordError(ValueError):
    """A TFRecord file or record that is not what the format says (truncated, corrupted, not an Example)."""


def read_records(path: str | os.PathLike[str], *, verify_data: bool = False) -> Iterator[bytes]:
    """The records of one TFRecord file, in order (see the module docstring for what is checked)."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise RecordError(f"{path}: truncated record header ({len(header)} of 12 bytes)")
            length, length_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != length_crc:
                raise RecordError(f"{path}: corrupted record length (CRC mismatch): not a TFRecord file?")
            payload = f.read(length + 4)
            if len(payload) < length + 4:
                raise RecordError(f"{path}: truncated record ({len(payload)} of {length + 4} bytes)")
            data = payload[:length]
            if verify_data and masked_crc32c(data) != struct.unpack("<I", payload[length:])[0]:
                raise RecordError(f"{path}: corrupted record data (CRC mismatch)")
            yield data


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise RecordError("truncated varint in an Example")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one protobuf message: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
            if pos > len(buf):
                raise RecordError("truncated length-delimited field in an Example")
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise RecordError(f"unsupported protobuf wire type {wire} in an Example")
        yield number, wire, value


def _feature_values(feature: bytes) -> tuple[list[bytes], list[int]]:
    """A ``Feature``: bytes_list = 1, float_list = 2, int64_list = 3 (each a list message, values = 1)."""
    strings: list[bytes] = []
    ints: list[int] = []
    for number, _, value in _fields(feature):
        if number == 1:
            strings.extend(v for n, _, v in _fields(value) if n == 1)
        elif number == 3:
            for n, wire, v in _fields(value):
                if n != 1:
                    continue
                if wire == 2:  # packed
                    pos = 0
                    while pos < len(v):
                        item, pos = _varint(v, pos)
                        ints.append(item)
                else:
                    ints.append(v)
    # int64 is two's complement in a 64-bit varint.
    return strings, [i - (1 << 64) if i >= 1 << 63 else i for i in ints]


def parse_example(record: bytes) -> tuple[bytes, int]:
    """(``image/encoded`` bytes, ``image/class/label``) of a serialised ``tf.train.Example``."""
    encoded: bytes | None = None
    label: int | None = None
    for number, _, features in _fields(record):
        if number != 1:  # Example.features
            continue
        for n, _, entry in _fields(features):
            if n != 1:  # Features.feature: map<string, Feature> entries (key = 1, value = 2)
                continue
            key, value = b"", b""
            for k, _, v in _fields(entry):
                if k == 1:
                    key = v
                elif k == 2:
                    value = v
            if key == b"image/encoded":
                strings, _ = _feature_values(value)
                encoded = strings[0] if strings else None
            elif key == b"image/class/label":
                _, ints = _feature_values(value)
                label = ints[0] if ints else None
    if encoded is None or label is None:
        raise RecordError("record is not an ImageNet-format Example (needs image/encoded and image/class/label)")
    return encoded, label


def decode(encoded: bytes, image_size: int) -> np.ndarray:
    """JPEG bytes -> float32 RGB image_size x image_size x 3 in [0, 1] (as data.real_dataset)."""
    with Image.open(io.BytesIO(encoded)) as image:
        rgb = image.convert("RGB")
    if rgb.size != (image_size, image_size):
        rgb = rgb.resize((image_size, image_size), Image.Resampling.BILINEAR)
    return np.asarray(rgb, dtype=np.float32) * np.float32(1.0 / 255.0)


def _check_label(label: int, num_classes: int, path: str) -> int:
    # ImageNet labels are 1-based with 0 unused; a label outside the model's classes is a
    # dataset/profile mismatch and must fail loudly rather than train on garbage (data.real_dataset).
    if not 0 <= label < num_classes:
        raise RecordError(f"{path}: label {label} out of range for num_classes {num_classes}")
    return label


PREFETCH_BATCHES = 4
"""Batches decoded ahead of the training step (tf.data's prefetch, bounded so memory stays small)."""


def batches(data_dir: str | os.PathLike[str], batch_size: int, image_size: int, num_classes: int, *,
            seed: int = 0, workers: int | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Endless (images NHWC float32, labels int64) batches of ``data_dir``'s ``train-*`` shards.

    Like :func:`data.real_dataset`: file order shuffled (by ``seed``, anew each pass), repeated,
    whole batches only. A background thread decodes (with ``workers`` threads: Pillow releases the
    GIL while decoding) up to :data:`PREFETCH_BATCHES` batches ahead; an error there (a corrupted
    file, a label out of range) is raised here, at the batch it spoiled. Closing the generator
    stops the thread."""
    if batch_size < 1 or image_size < 1 or num_classes < 2:
        raise ValueError("batch_size and image_size must be >= 1 and num_classes >= 2")
    files = tfrecord_files(data_dir)  # FileNotFoundError naming the pattern when there are none
    ready: queue.Queue[tuple[np.ndarray, np.ndarray] | BaseException] = queue.Queue(PREFETCH_BATCHES)
    stop = threading.Event()
    threads = workers or min(8, os.cpu_count() or 1)

    def put(item: tuple[np.ndarray, np.ndarray] | BaseException) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def records() -> Iterator[tuple[bytes, int, str]]:
        rng = random.Random(seed)
        while True:
            order = list(files)
            rng.shuffle(order)
            found = False
            for path in order:
                for record in read_records(path):
                    encoded, label = parse_example(record)
                    found = True
                    yield encoded, _check_label(label, num_classes, path), path
            if not found:
                raise RecordError(f"no records in the TFRecord files of {os.fspath(data_dir)}")

    def produce() -> None:
        try:
            with ThreadPoolExecutor(threads, thread_name_prefix="dlbench-decode") as pool:
                pending: list[tuple[bytes, int, str]] = []
                for item in records():
                    pending.append(item)
                    if len(pending) < batch_size:
                        continue
                    images = np.stack(list(pool.map(lambda p: decode(p[0], image_size), pending)))
                    labels = np.fromiter((p[1] for p in pending), dtype=np.int64, count=batch_size)
                    pending = []
                    if not put((images, labels)):
                        return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised at its next batch
            put(exc)

    thread = threading.Thread(target=produce, name="dlbench-tfrecord", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
