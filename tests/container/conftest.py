from __future__ import annotations

import pytest

from tests.conftest import require


@pytest.fixture(scope="session")
def docker_client():
    from dlbench.execution.image import docker_available

    ok, reason = docker_available()
    require(ok, reason)
    import docker

    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="session")
def workload_image(docker_client):
    """The real workload image, built from docker/Dockerfile when missing (minutes the first time)."""
    from dlbench.execution.image import DEFAULT_TAG, ensure_image

    return ensure_image(DEFAULT_TAG)


@pytest.fixture(scope="session")
def tfrecords_dir(tmp_path_factory):
    from dlbench.workloads.tf_cnn.data import write_imagenet_tfrecords

    out = tmp_path_factory.mktemp("ct-tfrecords")
    write_imagenet_tfrecords(out, images=24, shards=2, image_size=80)
    return out
