from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tfrecords_dir(tmp_path_factory):
    from dlbench.workloads.tf_cnn.data import write_imagenet_tfrecords

    out = tmp_path_factory.mktemp("ct-tfrecords")
    write_imagenet_tfrecords(out, images=24, shards=2, image_size=80)
    return out
