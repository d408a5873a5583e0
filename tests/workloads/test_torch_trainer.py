"""The real PyTorch runner, one process per run as in production: the CLI, the harness and the document.

Smoke shapes, a few steps, on this machine's CPU: every model on synthetic data, a real-data job
on TFRecords TensorFlow wrote, bf16 (autocast on the CPU), tf32 refused where no GPU has it, DDP
across two processes over Gloo on 127.0.0.1 (as two instances of the distributed scenario), DDP
with two local processes (the multi-GPU path, on CPUs), and a ``--loop`` background stopped by
SIGTERM, mirroring the TensorFlow runner's tests (test_tf_trainer.py, test_distributed.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import jsonschema
import pytest

from dlbench.workloads.result import ResultDocument, Status, json_schema
from tests.support.cli import run_cli
from tests.workloads.test_distributed import STOPPED, Role, free_ports, overlap_share, run_workers, steps, window

MODELS = ["inception3", "resnet50", "alexnet"]
SMOKE_PARAMETERS = {  # trainable parameters at the smoke profile's sizes and 10 classes (the Keras models')
    "resnet50": 23_528_522,  # 25,559,081 less the final layer's 2048 * 991 + 991
    "inception3": 21_788_842,  # 23,819,401 less 2048 * 991 + 991
    "alexnet": 21_082_058,  # 256 * 1 * 1 flattened at 67 px (not 256 * 6 * 6): 61,842,345 - 40,760,287
}
PYTORCH = ("tf-cnn", "--framework", "pytorch", "--profile", "smoke", "--platform", "bare_metal", "--run-id", "t")



@pytest.fixture(scope="module")
def tfrecords(tmp_path_factory):
    from dlbench.workloads.cnn import tf_data

    out = tmp_path_factory.mktemp("tfrecords")
    tf_data.write_imagenet_tfrecords(out, images=24, shards=2, image_size=80, num_classes=10)
    return out


def assert_trained(doc: ResultDocument, model: str, *, measured: int = 2) -> None:
    assert doc.status is Status.OK, doc.error
    assert doc.benchmark.suite == "tf_cnn" and doc.benchmark.name == model
    assert doc.benchmark.parameters["framework"] == "pytorch"
    assert doc.labels["framework"] == "pytorch" and doc.labels["backend"] == "cpu"
    assert doc.labels["compiler"] == "eager"
    assert doc.labels["framework_version"] == doc.environment.versions["torch"]
    assert doc.labels["model_parameters"] == str(SMOKE_PARAMETERS[model])
    assert doc.sample("throughput").value > 0
    step_samples = [s for s in doc.samples if s.metric == "step_time"]
    assert [s.labels["warmup"] for s in step_samples] == [True] + [False] * measured
    measured_seconds = sum(s.value for s in step_samples if not s.labels["warmup"])
    batch = doc.sample("throughput").labels["batch_size"]
    assert doc.sample("throughput").value == pytest.approx(measured * batch / measured_seconds)
    assert doc.sample("elapsed_time").value > doc.sample("measured_time").value
    assert doc.sample("setup_time").value > 0
    assert doc.labels["diverged"] == "false" and doc.sample("loss").value > 0


@pytest.mark.parametrize("model", MODELS)
def test_model_trains_and_writes_a_valid_document(model, tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli(*PYTORCH, "--model", model, "--warmup-steps", "1", "--measured-steps", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    jsonschema.validate(json.loads(out.read_text()), json_schema())
    doc = ResultDocument.read(out)
    assert_trained(doc, model)
    assert doc.benchmark.parameters["data"] == "synthetic"
    assert doc.labels["placement"] == "cpu" and doc.labels["replicas"] == "1"
    assert doc.labels["variable_device"] == "cpu" and doc.labels["precision"] == "fp32"
    assert doc.labels["global_batch_size"] == str(doc.sample("throughput").labels["batch_size"])
    assert "precision" not in doc.benchmark.parameters  # fp32 is what every older document meant
    assert int(doc.environment.versions["torch_threads"]) >= 1


def test_real_data_from_tensorflows_tfrecords(tfrecords, tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli(*PYTORCH, "--model", "alexnet", "--data", "real", "--data-dir", str(tfrecords),
                   "--warmup-steps", "1", "--measured-steps", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = ResultDocument.read(out)
    assert_trained(doc, "alexnet")
    assert doc.benchmark.parameters["data"] == "real"
    assert doc.sample("throughput").labels["data"] == "real"


def test_real_data_without_files_fails_with_a_document(tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli(*PYTORCH, "--model", "alexnet", "--data", "real", "--data-dir", str(tmp_path / "none"),
                   "--out", str(out))
    assert proc.returncode == 1
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED and "no TFRecord files" in doc.error


def test_bf16_trains_on_the_cpu(tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli(*PYTORCH, "--model", "resnet50", "--precision", "bf16", "--warmup-steps", "1",
                   "--measured-steps", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = ResultDocument.read(out)
    assert_trained(doc, "resnet50")
    assert doc.labels["precision"] == "bf16" and doc.benchmark.parameters["precision"] == "bf16"


def test_tf32_is_refused_on_the_cpu_saying_why(tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli(*PYTORCH, "--model", "alexnet", "--precision", "tf32", "--out", str(out))
    assert proc.returncode == 1
    doc = ResultDocument.read(out)
    assert doc.status is Status.FAILED
    assert "tf32 needs an NVIDIA GPU of compute capability 8.0" in doc.error and "CPU" in doc.error
    assert doc.labels["precision"] == "tf32" and doc.benchmark.parameters["precision"] == "tf32"
    assert not any(s.metric == "throughput" for s in doc.samples)


def test_ddp_across_two_instances_over_gloo(tmp_path):
    ports = free_ports(2)
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in ports]})
    args = (*PYTORCH, "--model", "alexnet", "--warmup-steps", "2", "--measured-steps", "3", "--scenario",
            "distributed", "--mode", "ddp", "--role", "worker", "--cluster", cluster)
    docs = run_workers(tmp_path, 2, *args)
    for index, doc in enumerate(docs):
        assert doc.status is Status.OK, doc.error
        params = doc.benchmark.parameters
        assert (params["mode"], params["workers"], params["parameter_servers"]) == ("ddp", 2, 0)
        assert doc.labels["placement"] == "ddp" and doc.labels["task_index"] == str(index)
        assert doc.labels["replicas"] == "1" and doc.labels["global_batch_size"] == "16"
        assert doc.labels["local_parameter_device"] == "cpu" and doc.labels["framework"] == "pytorch"
        assert doc.sample("throughput").labels["batch_size"] == 8  # this worker's images per step
        assert doc.sample("throughput").value > 0
    assert docs[0].benchmark.parameters == docs[1].benchmark.parameters  # the role is a label
    # DDP kept the replicas' weights equal through every step (all-reduced gradients).
    assert docs[0].labels["weights_checksum"] == docs[1].labels["weights_checksum"]
    assert len(steps(docs[0])) == len(steps(docs[1])) == 5
    assert overlap_share(window(docs[0]), window(docs[1])) > 0.8
    assert "at the barrier before the measured steps" in (tmp_path / "w1.log").read_text()


def test_ddp_worker_waiting_for_its_peer_stops_on_sigterm(tmp_path):
    """Worker 0 of two, the other never comes: it waits at the rendezvous. SIGTERM (the executor,
    when another role failed) ends it promptly with a failed document naming the stop."""
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]})
    worker = Role(tmp_path, "w0", *PYTORCH, "--model", "alexnet", "--scenario", "distributed", "--mode", "ddp",
                  "--role", "worker", "--task-index", "0", "--cluster", cluster)
    try:
        worker.wait_for("joining the process group")
        time.sleep(1)
        assert worker.proc.poll() is None  # waiting for worker 1
        code, seconds = worker.stop()
    finally:
        worker.kill()
    assert code == 1 and seconds < 10, worker.stderr()
    doc = worker.doc()
    assert doc.status is Status.FAILED and doc.error == STOPPED and doc.labels["ended_by"] == "sigterm"
    assert not any(s.metric == "throughput" for s in doc.samples)


def test_ddp_with_one_process_per_device_on_one_instance(tmp_path):
    """The multi-GPU path (rank 0 records, helpers spawned), with two CPU processes over Gloo."""
    out = tmp_path / "result.json"
    script = textwrap.dedent(f"""
        from dlbench.workloads import harness
        from dlbench.workloads.profiles import DataKind, ModelName, get_profile
        from dlbench.workloads.result import Benchmark
        from dlbench.workloads.cnn import torch_trainer

        spec = get_profile("smoke").training("alexnet").model_copy(update={{"warmup_steps": 1, "measured_steps": 2}})
        with harness.workload(Benchmark(suite="tf_cnn", name="alexnet", parameters={{}}), out={str(out)!r}) as doc:
            torch_trainer.train(doc, model_name=ModelName.ALEXNET, spec=spec, data=DataKind.SYNTHETIC, processes=2)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK, doc.error
    assert doc.labels["placement"] == "ddp_cpu" and doc.labels["replicas"] == "2"
    assert doc.labels["global_batch_size"] == "16"
    assert doc.sample("throughput").labels["batch_size"] == 16  # both processes' images per step
    assert len(steps(doc)) == 3 and "weights_checksum" in doc.labels


def test_loop_background_runs_until_stopped(tmp_path):
    background = Role(tmp_path, "background", *PYTORCH, "--model", "alexnet", "--warmup-steps", "1",
                      "--measured-steps", "2", "--scenario", "shared", "--condition", "background", "--tenants", "2",
                      "--batch-size", "4", "--loop")
    try:
        background.wait_for("loop 2 done")
        code, seconds = background.stop()
    finally:
        background.kill()
    assert code == 0, background.stderr()
    assert seconds < 10
    doc = background.doc()
    assert doc.status is Status.OK and doc.labels["ended_by"] == "sigterm"
    params = doc.benchmark.parameters
    assert (params["scenario"], params["condition"], params["loop"], params["framework"]) == (
        "shared", "background", True, "pytorch")
    loops = doc.sample("loops").value
    measured = [s.value for s in doc.samples if s.metric == "step_time" and not s.labels["warmup"]]
    assert loops >= 2 and 2 * loops <= len(measured) < 2 * (loops + 1)  # every completed step counts
    assert doc.sample("throughput").value == pytest.approx(len(measured) * 4 / sum(measured))
    start, end = window(doc)
    assert end - start >= sum(measured)


def test_a_gpu_machine_with_a_cpu_build_fails_naming_the_image():
    from dlbench.workloads.cnn.torch_trainer import gpus_unused

    assert "PyTorch is a CPU build: use the GPU workload image" in gpus_unused(2, 0, False, None)
    assert "PyTorch sees none" in gpus_unused(1, 0, True, None)
    assert gpus_unused(2, 0, False, "") is None  # gpus: none asks for the CPU on purpose
    assert gpus_unused(0, 0, False, None) is None and gpus_unused(2, 2, True, None) is None
