"""The TFRecord reader of the PyTorch and JAX runners against files TensorFlow wrote.

The files come from :func:`tf_data.write_imagenet_tfrecords` (tf.io.TFRecordWriter, tf.train.Example);
TensorFlow itself reads them back for the expected values, so the reader is checked against the
format's owner, not against our own writer of it.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dlbench.workloads.cnn import tf_data, tfrecord


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    out = tmp_path_factory.mktemp("tfrecords")
    return tf_data.write_imagenet_tfrecords(out, images=12, shards=2, image_size=40, num_classes=10, seed=3)


def tensorflow_examples(path) -> list[tuple[bytes, int]]:
    import tensorflow as tf

    features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    out = []
    for record in tf.data.TFRecordDataset(str(path)):
        parsed = tf.io.parse_single_example(record, features)
        out.append((parsed["image/encoded"].numpy(), int(parsed["image/class/label"])))
    return out


def test_records_and_examples_are_what_tensorflow_reads(shards):
    for path in shards:
        ours = [tfrecord.parse_example(r) for r in tfrecord.read_records(path, verify_data=True)]
        assert ours == tensorflow_examples(path)  # byte-exact JPEGs, equal labels, same order
    assert sum(1 for p in shards for _ in tfrecord.read_records(p)) == 12


def test_crc32c_is_castagnoli():
    assert tfrecord.crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
    assert tfrecord.crc32c(b"") == 0


def test_corrupted_and_truncated_files_fail(shards, tmp_path):
    raw = bytearray(shards[0].read_bytes())
    flipped = tmp_path / "flipped"
    raw[40] ^= 0xFF  # inside the first record's data
    flipped.write_bytes(bytes(raw))
    with pytest.raises(tfrecord.RecordError, match="corrupted record data"):
        list(tfrecord.read_records(flipped, verify_data=True))
    length = tmp_path / "length"
    raw = bytearray(shards[0].read_bytes())
    raw[0] ^= 0x01  # the first record's length
    length.write_bytes(bytes(raw))
    with pytest.raises(tfrecord.RecordError, match="corrupted record length"):
        list(tfrecord.read_records(length))
    truncated = tmp_path / "truncated"
    truncated.write_bytes(shards[0].read_bytes()[:-3])
    with pytest.raises(tfrecord.RecordError, match="truncated record"):
        list(tfrecord.read_records(truncated))


def test_decoded_images_match_tensorflows_decode(shards):
    import tensorflow as tf

    encoded, _ = tensorflow_examples(shards[0])[0]
    ours = tfrecord.decode(encoded, 40)
    # Pillow decodes with libjpeg's accurate integer IDCT; tf.data's decode_jpeg defaults to the fast
    # one (a few levels apart on noise). With the same IDCT the pixels are equal.
    theirs = tf.io.decode_jpeg(encoded, channels=3, dct_method="INTEGER_ACCURATE").numpy() / 255.0
    assert ours.shape == (40, 40, 3) and ours.dtype == np.float32
    assert float(np.abs(ours - theirs).max()) <= 1e-6
    resized = tfrecord.decode(encoded, 24)
    assert resized.shape == (24, 24, 3) and 0.0 <= resized.min() and resized.max() <= 1.0


def test_batches_cover_the_data_set_and_repeat(shards):
    expected = sorted(label for p in shards for _, label in tensorflow_examples(p))
    stream = tfrecord.batches(shards[0].parent, 4, 32, 10, seed=1)
    try:
        got = [next(stream) for _ in range(6)]  # two passes over 12 images
    finally:
        stream.close()
    for images, labels in got:
        assert images.shape == (4, 32, 32, 3) and images.dtype == np.float32
        assert labels.shape == (4,) and labels.dtype == np.int64
    first_pass = sorted(int(x) for _, labels in got[:3] for x in labels)
    second_pass = sorted(int(x) for _, labels in got[3:] for x in labels)
    assert first_pass == second_pass == expected


def test_a_label_outside_the_classes_fails_loudly(shards):
    stream = tfrecord.batches(shards[0].parent, 4, 32, num_classes=2)
    with pytest.raises(tfrecord.RecordError, match="out of range for num_classes 2"):
        for _ in range(4):
            next(stream)


def test_no_files_names_the_pattern_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-"):
        next(tfrecord.batches(tmp_path, 4, 32, 10))


def test_reading_needs_no_tensorflow(shards):
    code = (f"import sys; from dlbench.workloads.cnn import tfrecord; "
            f"images, labels = next(tfrecord.batches({str(shards[0].parent)!r}, 3, 16, 10)); "
            f"assert images.shape == (3, 16, 16, 3); "
            f"bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'torch', 'jax', 'keras')]; "
            f"print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
