"""Where a data set's ImageNet-format TFRecord shards are: the one file pattern every framework's
reader globs (TensorFlow's ``tf.data`` in :mod:`.tf_data`, the others' pure-Python reader in
:mod:`.tfrecord`) and the error that tells a user how to make a demo set. Imports no framework.
"""

from __future__ import annotations

import glob
import os

TFRECORD_PATTERN = "train-*"


def tfrecord_files(data_dir: str | os.PathLike[str]) -> list[str]:
    files = sorted(glob.glob(os.path.join(os.fspath(data_dir), TFRECORD_PATTERN)))
    if not files:
        raise FileNotFoundError(
            f"no TFRecord files matching {TFRECORD_PATTERN!r} in {data_dir!s}; "
            "create a demo set with `python -m dlbench.workloads make-tfrecords --out DIR`"
        )
    return files
