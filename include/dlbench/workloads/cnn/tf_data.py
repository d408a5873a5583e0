"""TensorFlow's input data: synthetic tensors kept on the device, or ImageNet-format TFRecords.

Real data follows the layout of the standard ImageNet TFRecord conversion
(``image/encoded`` JPEG bytes, ``image/class/label`` int64, labels 1..1000 with 0 unused),
so users point the runner at their own ImageNet shards. :func:`write_imagenet_tfrecords`
makes a small dataset of that format from generated JPEGs for tests and demos.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dlbench.workloads.cnn.shards import tfrecord_files


def synthetic_batch(batch_size: int, image_size: int, num_classes: int, seed: int = 0) -> tuple[Any, Any]:
    """One batch generated once, reused every step: no input pipeline cost (tf_cnn_benchmarks' synthetic)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only making the data needs it

    gen = tf.random.Generator.from_seed(seed)
    images = gen.uniform((batch_size, image_size, image_size, 3), dtype=tf.float32)
    labels = gen.uniform((batch_size,), minval=0, maxval=num_classes, dtype=tf.int32)
    return images, labels


def real_dataset(data_dir: str | os.PathLike[str], batch_size: int, image_size: int, num_classes: int) -> Any:
    """tf.data pipeline: parallel reads, JPEG decode, resize, batch, prefetch."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only making the data needs it

    autotune = tf.data.AUTOTUNE
    files = tf.data.Dataset.from_tensor_slices(tfrecord_files(data_dir)).shuffle(1024, seed=0)
    records = files.interleave(
        tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=autotune, deterministic=False
    )
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record: Any) -> tuple[Any, Any]:
        parsed = tf.io.parse_single_example(record, features)
        image = tf.io.decode_jpeg(parsed["image/encoded"], channels=3)
        image = tf.image.resize(image, (image_size, image_size))
        image = tf.cast(image, tf.float32) / 255.0
        label = tf.cast(parsed["image/class/label"], tf.int32)
        # ImageNet labels are 1-based with 0 unused; a label outside the model's classes is a
        # dataset/profile mismatch and must fail loudly rather than train on garbage.
        tf.debugging.assert_less(label, num_classes, message="label out of range for num_classes")
        return image, label

    return (
        records.repeat()
        .map(parse, num_parallel_calls=autotune, deterministic=False)
        .batch(batch_size, drop_remainder=True)
        .prefetch(autotune)
    )


def write_imagenet_tfrecords(
    out_dir: str | os.PathLike[str],
    *,
    images: int = 64,
    shards: int = 4,
    image_size: int = 96,
    num_classes: int = 10,
    seed: int = 0,
) -> list[Path]:
    """Write ``images`` random JPEGs as ImageNet-format TFRecord shards ``train-0000i-of-0000n``."""
    import numpy as np  # heavy: only generating or reading data needs numpy
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only making the data needs it

    if images < 1 or shards < 1 or num_classes < 2:
        raise ValueError("images and shards must be >= 1 and num_classes >= 2")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = [out / f"train-{i:05d}-of-{shards:05d}" for i in range(shards)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    try:
        for i in range(images):
            pixels = rng.integers(0, 256, size=(image_size, image_size, 3), dtype=np.uint8)
            encoded = tf.io.encode_jpeg(tf.constant(pixels)).numpy()
            label = int(rng.integers(1, num_classes))
            example = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
                "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"JPEG"])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[image_size])),
                "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[image_size])),
            }))
            writers[i % shards].write(example.SerializeToString())
    finally:
        for writer in writers:
            writer.close()
    return paths
