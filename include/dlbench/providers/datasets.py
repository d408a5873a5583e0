"""The real-data set of a run: the user's ``data_dir`` or a generated ImageNet-format demo set.

The study replicates ImageNet on every node, so remote machines get a staged copy (see
:mod:`dlbench.execution.staging`) at :func:`remote_dataset_dir`; a ``data_dir`` the user names
is expected to exist on the machines already and is used as is.
"""

from __future__ import annotations

import logging
from pathlib import Path

from dlbench import paths
from dlbench.providers.backend import RunRequest
from dlbench.workloads.cnn.tf_data import write_imagenet_tfrecords
from dlbench.workloads.profiles import DataKind, ModelName

log = logging.getLogger(__name__)

REMOTE_DATA_ROOT = "/var/tmp/dlbench/data"
"""Where staged data sets live on a machine: disk-backed, writable without root, survives a reboot."""


def ensure_dataset(request: RunRequest) -> str | None:
    """The real-data directory on this worker: the user's (``data_dir``) or a generated demo set;
    None when no job of the request reads one."""
    if DataKind.REAL not in request.data or not request.needs_data_set:
        return None
    if request.data_dir:
        return request.data_dir
    profile = request.resolved_profile
    specs = [profile.training(model) for model in ModelName]
    size = max(spec.image_size for spec in specs)
    classes = min(spec.num_classes for spec in specs)
    target = paths.datasets_dir() / f"demo-imagenet-{size}px-{classes}c"
    if not (target / ".complete").exists():
        log.info("generating demo ImageNet-format TFRecords in %s", target)
        write_imagenet_tfrecords(target, images=128, shards=4, image_size=size, num_classes=classes)
        (target / ".complete").write_text("ok\n")
    return str(target)


def remote_dataset_dir(local: Path) -> str:
    return f"{REMOTE_DATA_ROOT}/{local.name}"
