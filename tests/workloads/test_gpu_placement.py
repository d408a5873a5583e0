"""Variable placement for 1 and N devices, checked where TensorFlow really puts the weights.

No GPU here, so the same placement code (``strategy_for``) runs on logical CPU devices: the
host CPU split into three, ``/device:CPU:1`` and ``/device:CPU:2`` standing for the GPUs. The
bug this guards against: with one GPU and ``local_parameter_device: cpu`` the runner used a
``OneDeviceStrategy("/gpu:0")`` (weights on the GPU) while labelling it ``parameter_server_cpu``.
Runs in a subprocess because logical devices can only be configured before TF initialises.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.cnn import tf_nets
from dlbench.workloads.cnn.tf_train import strategy_for, variable_copies, variable_device
base = get_profile("smoke").training("alexnet")
out = {}
for devices in (["/device:CPU:1"], ["/device:CPU:1", "/device:CPU:2"]):
    for update, param in (("parameter_server", "cpu"), ("parameter_server", "gpu"), ("mirrored", "cpu")):
        spec = base.model_copy(update={"variable_update": update, "local_parameter_device": param})
        strategy, label, replicas = strategy_for(devices, spec)
        with strategy.scope():
            model = tf_nets.build("alexnet", spec)
        copies = variable_copies(model)
        out[f"{len(devices)}|{update}|{param}"] = {
            "label": label, "replicas": replicas, "device": variable_device(model), "copies": copies,
            "compute": list(getattr(strategy.extended, "worker_devices", ()))}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def placements() -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("n", [1, 2])
def test_parameter_server_on_cpu_keeps_the_weights_on_the_cpu(placements, n):
    p = placements[f"{n}|parameter_server|cpu"]
    assert p["label"] == "parameter_server_cpu" and p["replicas"] == n
    assert p["device"].endswith("CPU:0"), p  # the host CPU, not a compute device
    assert [d.split("device:")[-1] for d in p["compute"]] == [f"CPU:{i + 1}" for i in range(n)], p


@pytest.mark.parametrize("n", [1, 2])
def test_parameter_server_on_the_device_keeps_them_on_the_first_device(placements, n):
    p = placements[f"{n}|parameter_server|gpu"]
    assert p["label"] == "parameter_server_gpu" and p["device"].endswith("CPU:1"), p


def test_mirrored_keeps_a_copy_on_every_device(placements):
    p = placements["2|mirrored|cpu"]
    assert p["label"] == "mirrored" and p["replicas"] == 2
    assert sorted(c.split("device:")[-1] for c in p["copies"]) == ["CPU:1", "CPU:2"], p


def test_a_gpu_machine_never_trains_on_its_cpu_silently():
    from dlbench.workloads.cnn.tf_train import gpus_unused

    assert gpus_unused(0, 0, False, None) is None  # no GPU: the CPU is the device
    assert gpus_unused(2, 2, True, None) is None  # TensorFlow uses them
    assert gpus_unused(2, 0, True, "") is None  # gpus: none hides them on purpose
    assert "CPU build" in gpus_unused(2, 0, False, None) and "make image-gpu" in gpus_unused(2, 0, False, None)
    assert "sees none" in gpus_unused(1, 0, True, "0")
