"""The real JAX runner: Keras 3 on JAX, XLA-compiled steps, through the workload command.

Every job is ``python -m dlbench.workloads tf-cnn --framework jax ...`` in its own process (Keras
picks its backend at import: a process that imported TensorFlow's Keras cannot run it), smoke
shapes and few steps. Parameter counts are checked at the paper's shapes against tf_cnn_benchmarks'.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from dlbench.workloads.result import ResultDocument, Status, json_schema
from tests.support.cli import run_cli
from tests.workloads.test_distributed import Role, free_ports, overlap_share, run_workers, steps, window

COMMON = ("tf-cnn", "--framework", "jax", "--profile", "smoke", "--platform", "bare_metal", "--run-id", "t")
FEW_STEPS = ("--warmup-steps", "1", "--measured-steps", "2")
SMOKE_BATCH = {"inception3": 4, "resnet50": 4, "alexnet": 8}



def run_job(tmp_path, model: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, ResultDocument, str]:
    out = tmp_path / f"{model}.json"
    proc = run_cli(*COMMON, "--model", model, *args, "--out", str(out), env=env)
    jsonschema.validate(json.loads(out.read_text()), json_schema())
    return proc.returncode, ResultDocument.read(out), proc.stderr


@pytest.mark.parametrize("model", ["inception3", "resnet50", "alexnet"])
def test_model_trains_and_writes_a_valid_document(model, tmp_path):
    code, doc, stderr = run_job(tmp_path, model, *FEW_STEPS)
    assert code == 0, stderr[-2000:]
    assert doc.status is Status.OK, doc.error
    assert doc.benchmark.parameters["framework"] == "jax"
    assert doc.environment.versions["jax"] == doc.labels["framework_version"]
    assert doc.environment.versions["keras"].startswith("3.") and doc.environment.versions["jax_backend"] == "cpu"
    assert (doc.labels["framework"], doc.labels["backend"], doc.labels["compiler"], doc.labels["precision"]) == (
        "jax", "cpu", "xla", "fp32")
    batch = SMOKE_BATCH[model]
    placed = (doc.labels["replicas"], doc.labels["placement"], doc.labels["global_batch_size"])
    assert placed == ("1", "cpu", str(batch))
    assert doc.labels["variable_device"].startswith("cpu")
    assert int(doc.labels["model_parameters"]) > 1_000_000
    throughput = doc.sample("throughput")
    assert throughput.value > 0 and throughput.labels["batch_size"] == batch
    step_samples = [s for s in doc.samples if s.metric == "step_time"]
    assert [s.labels["warmup"] for s in step_samples] == [True, False, False]
    measured = sum(s.value for s in step_samples if not s.labels["warmup"])
    assert throughput.value == pytest.approx(2 * batch / measured)
    # XLA compiled before step 0, inside the setup, so no step carries it.
    compile_time = doc.sample("compile_time").value
    assert 0 < compile_time < doc.sample("setup_time").value
    assert len([s for s in doc.samples if s.metric == "loss"]) == 3 and doc.labels["diverged"] == "false"


def test_parameter_counts_equal_tf_cnn_benchmarks_at_the_paper_shapes():
    """The JAX runner's Keras models at 1001 classes and the paper's image sizes have the trainable
    parameters of tf_cnn_benchmarks (tests/workloads/test_models_reference.py derives them), and
    weight decay skips batch norm's variables only.

    The models are built in a Keras stateless scope that never initialises its variables: the
    runner's own build, every variable with its shape, none drawn from its initialiser (what is
    asserted is shapes and which variables decay; drawing the 111 M paper-size values took 52-65 s
    of the local stream, the build alone under a second)."""
    code = """
import json, math
from dlbench.workloads.profiles import get_profile
from dlbench.workloads.cnn import jax_trainer, keras_nets
import keras
counts, decayed = {}, {}
with keras.StatelessScope(initialize_variables=False):
    for name in ("resnet50", "inception3", "alexnet"):
        model = jax_trainer.build_model(name, get_profile("paper").training(name))
        counts[name] = sum(math.prod(v.shape) for v in model.trainable_variables)
        l2 = {id(v) for v in keras_nets.l2_variables(model)}
        decayed[name] = [len(l2), len(model.trainable_variables),
                         all(isinstance(layer, keras.layers.BatchNormalization) for layer in model.layers
                             for v in layer.trainable_variables if id(v) not in l2)]
print(json.dumps({"backend": keras.backend.backend(), "counts": counts, "decayed": decayed}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "KERAS_BACKEND": "jax"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["backend"] == "jax"
    assert found["counts"] == {"resnet50": 25_559_081, "inception3": 23_819_401, "alexnet": 61_842_345}
    # ResNet-50: 53 unbiased convolutions with batch norm (gamma, beta) + the final affine layer;
    # decayed: the 53 kernels and the affine weights and biases. AlexNet has no batch norm.
    assert found["decayed"]["resnet50"] == [55, 161, True]
    assert found["decayed"]["alexnet"] == [16, 16, True]
    inception = found["decayed"]["inception3"]
    assert inception[1] == 2 * (inception[0] - 2) + 2 and inception[2]  # beta only (no scale) per convolution


def test_bf16_trains_on_the_cpu(tmp_path):
    code, doc, stderr = run_job(tmp_path, "resnet50", *FEW_STEPS, "--precision", "bf16")
    assert code == 0, stderr[-2000:]
    assert doc.status is Status.OK, doc.error
    assert doc.labels["precision"] == "bf16" and doc.benchmark.parameters["precision"] == "bf16"
    assert doc.sample("throughput").value > 0
    losses = [s.value for s in doc.samples if s.metric == "loss"]
    assert len(losses) == 3 and doc.labels["diverged"] == "false"


def test_tf32_on_a_cpu_is_refused_naming_the_reason(tmp_path):
    code, doc, _ = run_job(tmp_path, "alexnet", *FEW_STEPS, "--precision", "tf32")
    assert code == 1
    assert doc.status is Status.FAILED
    assert "precision tf32 needs NVIDIA GPUs with TensorFloat-32" in doc.error and "cpu" in doc.error
    assert "throughput" not in {s.metric for s in doc.samples}


def test_real_data_from_the_tfrecords_the_tensorflow_runner_reads(tmp_path):
    data_dir = tmp_path / "tfrecords"
    proc = run_cli("make-tfrecords", "--out", str(data_dir), "--images", "24", "--shards", "2", "--image-size", "80",
                   "--num-classes", "10")
    assert proc.returncode == 0, proc.stderr[-2000:]
    code, doc, stderr = run_job(tmp_path, "alexnet", *FEW_STEPS, "--data", "real", "--data-dir", str(data_dir))
    assert code == 0, stderr[-2000:]
    assert doc.status is Status.OK, doc.error
    assert doc.benchmark.parameters["data"] == "real" and doc.sample("throughput").labels["data"] == "real"
    assert doc.sample("throughput").value > 0


def test_every_local_device_trains_with_the_batch_split(tmp_path):
    """Two CPU devices (XLA's host platform split in two): the batch is sharded over both, the
    weights replicated, throughput counts both devices' images."""
    code, doc, stderr = run_job(tmp_path, "alexnet", *FEW_STEPS,
                                env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert code == 0, stderr[-2000:]
    assert doc.status is Status.OK, doc.error
    assert (doc.labels["replicas"], doc.labels["placement"], doc.labels["global_batch_size"]) == ("2", "mirrored", "16")
    assert doc.sample("throughput").labels["batch_size"] == 16


def test_jax_distributed_across_two_processes(tmp_path):
    """Two workers on 127.0.0.1: jax.distributed (Gloo for the CPU collectives), one global mesh.
    Both see the same losses: one program over the global batch, gradients reduced across them."""
    port, unused = free_ports(2)
    cluster = json.dumps({"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{unused}"]})
    args = (*COMMON, "--model", "alexnet", "--warmup-steps", "2", "--measured-steps", "3", "--scenario",
            "distributed", "--mode", "jax_distributed", "--cluster", cluster, "--role", "worker")
    docs = run_workers(tmp_path, 2, *args, timeout=300)
    for index, doc in enumerate(docs):
        assert doc.status is Status.OK, doc.error
        assert doc.benchmark.parameters["mode"] == "jax_distributed" and doc.benchmark.parameters["workers"] == 2
        assert (doc.labels["placement"], doc.labels["task_index"]) == ("jax_distributed", str(index))
        assert doc.labels["replicas"] == "1" and doc.labels["global_batch_size"] == "16"
        assert doc.sample("throughput").labels["batch_size"] == 8  # this worker's images per step
        assert len(steps(doc)) == 5
    losses = [[s.value for s in doc.samples if s.metric == "loss"] for doc in docs]
    assert losses[0] == losses[1] and len(losses[0]) == 5
    assert overlap_share(window(docs[0]), window(docs[1])) > 0.5
    assert "jax.distributed up (2 processes" in (tmp_path / "w1.log").read_text()


def test_loop_background_keeps_its_samples_when_stopped(tmp_path):
    background = Role(tmp_path, "background", *COMMON, "--model", "alexnet", "--warmup-steps", "1",
                      "--measured-steps", "2", "--scenario", "shared", "--condition", "background", "--loop")
    try:
        background.wait_for("loop 2 done", timeout=180)
        code, seconds = background.stop()
    finally:
        background.kill()
    assert code == 0, background.stderr()
    assert seconds < 20
    doc = background.doc()
    assert doc.status is Status.OK and doc.labels["ended_by"] == "sigterm"
    loops = doc.sample("loops").value
    measured = [s.value for s in doc.samples if s.metric == "step_time" and not s.labels["warmup"]]
    assert loops >= 2 and 2 * loops <= len(measured) < 2 * (loops + 1)
    assert doc.sample("throughput").value == pytest.approx(len(measured) * 8 / sum(measured))


def test_keras_on_another_backend_is_refused_clearly():
    """TensorFlow's Keras imported first fixes the backend: the JAX runner says so instead of
    training on TensorFlow under JAX's name."""
    code = ("import os; os.environ['KERAS_BACKEND'] = 'tensorflow'; import keras\n"
            "from dlbench.workloads.cnn import jax_trainer\n"
            "try:\n    jax_trainer.build_model('alexnet', None)\n"
            "except RuntimeError as exc:\n    print('refused:', exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused: Keras in this process runs on the tensorflow backend, not jax" in proc.stdout
