"""The distributed and shared-resource scenarios as the executor runs them: real processes, real TensorFlow.

Each role is ``python -m dlbench.workloads tf-cnn ...`` on 127.0.0.1 (free ports), smoke shapes,
AlexNet on synthetic data, a few steps; a parameter server and a ``--loop`` background end by
SIGTERM, as the executor ends them. The graph-mode models of distributed_replicated are checked
against the Keras models of the single-instance runner.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlbench.workloads.profiles import ModelName
from dlbench.workloads.result import ResultDocument, Status

COMMON = ("tf-cnn", "--model", "alexnet", "--profile", "smoke", "--platform", "bare_metal", "--run-id", "t")
STEPS = ("--warmup-steps", "2", "--measured-steps", "3")
STOPPED = "stopped by SIGTERM (the executor ended the job: another role failed or it timed out)"


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Role:
    """One workload process, its stderr in a file (the executor keeps it in its log)."""

    def __init__(self, tmp: Path, name: str, *args: str) -> None:
        self.out = tmp / f"{name}.json"
        self.log = tmp / f"{name}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dlbench.workloads", *args, "--out", str(self.out)],
                stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def wait_for(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text():
                return
            if self.proc.poll() is not None:
                pytest.fail(f"{self.out.stem} exited ({self.proc.returncode}) before {text!r}:\n{self.stderr()}")
            time.sleep(0.1)
        pytest.fail(f"{self.out.stem} did not log {text!r} in {timeout} s:\n{self.stderr()}")

    def wait(self, timeout: float = 180) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.out.stem} still running after {timeout} s:\n{self.stderr()}")

    def stop(self, timeout: float = 30) -> tuple[int, float]:
        """SIGTERM, as the executor sends it; returns the exit status and how long the process took to end."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout), time.monotonic() - started

    def doc(self) -> ResultDocument:
        return ResultDocument.read(self.out)

    def stderr(self) -> str:
        lines = self.log.read_text().splitlines()
        return "\n".join(line for line in lines if "dlbench" in line or "Error" in line)[-3000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def run_workers(tmp: Path, count: int, *args: str, timeout: float = 180) -> list[ResultDocument]:
    """``count`` worker roles of one job (``args``, each with its ``--task-index``), waited for
    together and killed if one hangs; fails naming the workers' errors unless all exit 0. Worker
    ``i``'s stderr stays in ``tmp / f"w{i}.log"`` (:class:`Role`'s file)."""
    workers = [Role(tmp, f"w{index}", *args, "--task-index", str(index)) for index in range(count)]
    try:
        codes = [worker.wait(timeout) for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert codes == [0] * count, "\n".join(worker.stderr() for worker in workers)
    return [worker.doc() for worker in workers]


def listens_on_all_interfaces(port: int) -> bool:
    """Whether some socket listens on the wildcard address (0.0.0.0 or ::) at ``port`` (/proc/net/tcp*)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port and set(address) == {"0"}:
                return True
    return False


def steps(doc: ResultDocument) -> list[float]:
    return [s.value for s in doc.samples if s.metric == "step_time"]


def window(doc: ResultDocument) -> tuple[float, float]:
    start, end = doc.sample("measured_window_start"), doc.sample("measured_window_end")
    assert start.unit == end.unit == "s" and start.labels["clock"] == end.labels["clock"] == "CLOCK_REALTIME"
    return start.value, end.value


def overlap_share(a: tuple[float, float], b: tuple[float, float]) -> float:
    """The overlap of two windows as a share of the longer one."""
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0])) / max(a[1] - a[0], b[1] - b[0])


@pytest.fixture(scope="module")
def replicated(tmp_path_factory) -> Iterator[dict]:
    """1 parameter server + 2 workers of distributed_replicated; the PS stopped after the workers end."""
    tmp = tmp_path_factory.mktemp("replicated")
    ps_port, w0_port, w1_port = free_ports(3)
    cluster = json.dumps({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{w0_port}", f"127.0.0.1:{w1_port}"]})
    args = (*COMMON, *STEPS, "--scenario", "distributed", "--mode", "distributed_replicated", "--cluster", cluster)
    started = time.monotonic()
    roles = {name: Role(tmp, name, *args, "--role", role, "--task-index", index)
             for name, role, index in (("ps", "ps", "0"), ("w0", "worker", "0"), ("w1", "worker", "1"))}
    try:
        roles["ps"].wait_for("TF server listening")
        roles["w1"].wait_for("TF server listening")
        listening = {"ps": listens_on_all_interfaces(ps_port), "w1": listens_on_all_interfaces(w1_port)}
        codes = {name: roles[name].wait() for name in ("w0", "w1")}
        time.sleep(1)  # the parameter server outlives its workers until the executor stops it
        codes["ps"], stop_seconds = roles["ps"].stop()
        yield {"roles": roles, "codes": codes, "cluster": cluster, "listening": listening,
               "stop_seconds": stop_seconds, "seconds": time.monotonic() - started,
               "addresses": {"ps": f"127.0.0.1:{ps_port}", "w0": f"127.0.0.1:{w0_port}", "w1": f"127.0.0.1:{w1_port}"}}
    finally:
        for role in roles.values():
            role.kill()


def test_replicated_workers_train_in_lock_step(replicated):
    roles = replicated["roles"]
    for name in ("w0", "w1"):
        assert replicated["codes"][name] == 0, roles[name].stderr()
    w0, w1 = roles["w0"].doc(), roles["w1"].doc()
    for index, doc in enumerate((w0, w1)):
        assert doc.status is Status.OK, doc.error
        params = doc.benchmark.parameters
        assert params["scenario"] == "distributed"
        assert params["variable_update"] == params["mode"] == "distributed_replicated"
        assert params["workers"] == 2 and params["parameter_servers"] == 1
        assert doc.labels["role"] == "worker" and doc.labels["task_index"] == str(index)
        assert doc.labels["cluster"] == replicated["cluster"]
        assert doc.labels["address"] == replicated["addresses"][f"w{index}"]
        assert doc.labels["local_parameter_device"] == "cpu"  # no GPU here: the local copies live on the CPU
        assert doc.labels["placement"] == "distributed_replicated"
        assert doc.labels["global_batch_size"] == "16"  # 8 per worker, 2 workers
        measured = [s for s in doc.samples if s.metric == "step_time" and not s.labels["warmup"]]
        assert len(measured) == 3
        throughput = doc.sample("throughput")
        assert throughput.value == pytest.approx(3 * 8 / sum(s.value for s in measured))
        assert doc.sample("setup_time").value > 0
        # the loss trajectory is recorded as in the single-instance runner (a NaN does not fail the run)
        losses = [s for s in doc.samples if s.metric == "loss"]
        assert losses and losses[0].labels["step"] == 0 and doc.labels["diverged"] in ("true", "false")
    assert len(steps(w0)) == len(steps(w1)) == 5
    assert w0.benchmark.parameters == w1.benchmark.parameters  # the role is a label, not a parameter
    # The barrier before the first measured step and the per-step barrier keep the windows together.
    assert overlap_share(window(w0), window(w1)) > 0.8, (window(w0), window(w1))
    # Synchronous: neither worker can run ahead, so their measured times agree closely.
    assert w0.sample("measured_time").value == pytest.approx(w1.sample("measured_time").value, rel=0.3)


def test_parameter_server_ends_ok_when_stopped(replicated):
    ps = replicated["roles"]["ps"]
    assert replicated["codes"]["ps"] == 0, ps.stderr()
    assert replicated["stop_seconds"] < 10
    doc = ps.doc()
    assert doc.status is Status.OK and doc.error is None
    assert doc.labels["ended_by"] == "sigterm"
    assert doc.labels["role"] == "ps" and doc.labels["address"] == replicated["addresses"]["ps"]
    # It served from before the workers' first step until it was stopped after their last one.
    uptime = doc.sample("uptime").value
    worker_windows = [window(replicated["roles"][name].doc()) for name in ("w0", "w1")]
    assert uptime > max(end for _, end in worker_windows) - min(start for start, _ in worker_windows)
    assert not any(s.metric == "throughput" for s in doc.samples)


def test_servers_listen_on_all_interfaces(replicated):
    """In a container with published ports the cluster address is the node's: bind the wildcard."""
    assert replicated["listening"] == {"ps": True, "w1": True}


def test_multi_worker_mirrored(tmp_path):
    ports = free_ports(2)
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in ports]})
    args = (*COMMON, *STEPS, "--scenario", "distributed", "--mode", "multi_worker_mirrored", "--cluster", cluster,
            "--role", "worker")
    docs = run_workers(tmp_path, 2, *args)
    for index, doc in enumerate(docs):
        assert doc.status is Status.OK, doc.error
        assert doc.benchmark.parameters["variable_update"] == "multi_worker_mirrored"
        assert doc.benchmark.parameters["parameter_servers"] == 0 and doc.benchmark.parameters["workers"] == 2
        assert doc.labels["placement"] == "multi_worker_mirrored" and doc.labels["task_index"] == str(index)
        assert doc.labels["replicas"] == "1" and doc.labels["global_batch_size"] == "16"
        assert doc.sample("throughput").labels["batch_size"] == 8  # this worker's images per step
    assert len(steps(docs[0])) == len(steps(docs[1])) == 5
    assert overlap_share(window(docs[0]), window(docs[1])) > 0.8


def test_loop_background_runs_until_stopped(tmp_path):
    background = Role(tmp_path, "background", *COMMON, "--warmup-steps", "1", "--measured-steps", "2",
                      "--scenario", "shared", "--condition", "background", "--tenants", "2", "--batch-size", "4",
                      "--loop")
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
    assert (params["scenario"], params["condition"], params["tenants"], params["loop"]) == ("shared", "background", 2,
                                                                                            True)
    assert params["batch_size_per_device"] == 4
    loops = doc.sample("loops").value
    measured = [s.value for s in doc.samples if s.metric == "step_time" and not s.labels["warmup"]]
    assert loops >= 2 and len(measured) >= 2 * loops  # every completed step counts, a partial window too
    assert len(measured) < 2 * (loops + 1)
    assert doc.sample("throughput").value == pytest.approx(len(measured) * 4 / sum(measured))
    start, end = window(doc)
    assert end - start >= sum(measured)  # the window spans every measured step


def test_worker_stopped_mid_run_fails_naming_sigterm(tmp_path):
    """Worker 0 of two, the other never comes: its first step waits at the barrier inside a native
    session call. SIGTERM must still end it promptly with a document."""
    ps_port, w0_port, w1_port = free_ports(3)
    cluster = json.dumps({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{w0_port}", f"127.0.0.1:{w1_port}"]})
    args = (*COMMON, *STEPS, "--scenario", "distributed", "--mode", "distributed_replicated", "--cluster", cluster)
    ps = Role(tmp_path, "ps", *args, "--role", "ps", "--task-index", "0")
    worker = Role(tmp_path, "w0", *args, "--role", "worker", "--task-index", "0")
    try:
        worker.wait_for("warm-up")
        time.sleep(1)
        assert worker.proc.poll() is None  # blocked at the barrier, waiting for worker 1
        code, seconds = worker.stop()
        ps_code, _ = ps.stop()
    finally:
        ps.kill()
        worker.kill()
    assert code == 1 and seconds < 10, worker.stderr()
    assert "SIGTERM" in worker.stderr()
    doc = worker.doc()
    assert doc.status is Status.FAILED and doc.error == STOPPED
    assert doc.labels["role"] == "worker" and doc.labels["ended_by"] == "sigterm"
    assert not any(s.metric == "throughput" for s in doc.samples)
    assert ps_code == 0 and ps.doc().status is Status.OK


def test_single_run_records_its_measured_window(tmp_path):
    before = time.time()
    run = Role(tmp_path, "single", *COMMON, "--warmup-steps", "1", "--measured-steps", "2")
    try:
        assert run.wait() == 0, run.stderr()
    finally:
        run.kill()
    doc = run.doc()
    assert "scenario" not in doc.benchmark.parameters  # single documents are what they always were
    start, end = window(doc)
    assert before < start < end < time.time()
    assert end - start == pytest.approx(doc.sample("measured_time").value, abs=0.05)


@pytest.mark.parametrize("args, message", [
    (("--scenario", "distributed"), "--mode is required"),
    (("--mode", "distributed_replicated"), "need --scenario distributed"),
    (("--scenario", "distributed", "--mode", "multi_worker_mirrored", "--role", "ps", "--task-index", "0",
      "--cluster", '{"worker": ["h:1"]}'), "workers only"),
    (("--scenario", "distributed", "--mode", "distributed_replicated", "--role", "worker", "--task-index", "2",
      "--cluster", '{"ps": ["h:1"], "worker": ["h:2", "h:3"]}'), "outside the cluster"),
    (("--scenario", "distributed", "--mode", "distributed_replicated", "--role", "worker", "--task-index", "0",
      "--cluster", '{"worker": ["h:2"]}'), 'needs a "ps" list'),
    (("--scenario", "shared"), "needs --condition"),
    (("--condition", "alone"), "need --scenario shared"),
])
def test_inconsistent_arguments_exit_2(tmp_path, args, message):
    out = tmp_path / "x.json"
    proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", *COMMON, *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("model", ["alexnet", "resnet50", "inception3"])
def test_graph_models_are_the_keras_models(model):
    """distributed_replicated trains the same networks as the single-instance runner: same
    variables (trainable and moving averages), same shapes, same output."""
    import tensorflow as tf

    from dlbench.workloads.cnn import tf_nets
    from dlbench.workloads.profiles import get_profile

    spec = get_profile("smoke").training(model)
    keras_model = tf_nets.build(model, spec)
    keras_shapes = sorted(tuple(w.shape) for w in keras_model.trainable_weights)
    keras_moving = sum(math.prod(w.shape) for w in keras_model.non_trainable_weights)
    graph_shapes, graph_moving = [], 0

    def variable(name, shape, initializer, trainable):
        nonlocal graph_moving
        if trainable:
            graph_shapes.append(tuple(shape))
        else:
            graph_moving += math.prod(shape)
        return tf.compat.v1.Variable(initializer(shape), name=name, trainable=trainable, use_resource=True)

    with tf.Graph().as_default():
        images = tf.compat.v1.placeholder(tf.float32, [2, spec.image_size, spec.image_size, 3])
        logits = tf_nets.GRAPH_MODELS[ModelName(model)](tf_nets.GraphBuilder(variable), images, spec.num_classes)
    assert sorted(graph_shapes) == keras_shapes
    assert graph_moving == keras_moving
    assert logits.shape.as_list() == [2, spec.num_classes]


def test_global_variables_are_spread_over_the_parameter_servers_by_size():
    """Two parameter servers: every trainable variable has one global copy, on the task with the
    fewest bytes so far, and a local copy on the worker's device; the two tasks end up balanced."""
    import tensorflow as tf

    from dlbench.workloads.cnn import tf_cluster, tf_nets
    from dlbench.workloads.profiles import ModelName, get_profile

    spec = get_profile("smoke").training("resnet50")
    ps = ["/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"]
    local = "/job:worker/replica:0/task:1/device:CPU:0"
    with tf.Graph().as_default():
        variables = tf_cluster._ReplicatedVariables(ps)
        images = tf.compat.v1.placeholder(tf.float32, [2, spec.image_size, spec.image_size, 3])
        tf_nets.GRAPH_MODELS[ModelName.RESNET50](tf_nets.GraphBuilder(variables.factory(0, local)), images, 10)
        pairs = variables.pairs[0]
        # tf_cnn_benchmarks' ResNet-50 v1: 53 unbiased convolutions, each with batch norm (gamma,
        # beta), and the final affine layer (weights, biases): 53 + 2 * 53 + 2 variables.
        assert len(pairs) == 161 and len(variables.globals) == 161
        assert {lv.device for lv, _ in pairs} == {local}
        placed = {task: sum(math.prod(g.shape.as_list()) * 4 for _, g in pairs if g.device == task) for task in ps}
    # 25,559,081 parameters at 1001 classes (tests/workloads/test_models_reference.py) less the
    # final layer's 2048 * 991 + 991 for 10 classes.
    assert sum(placed.values()) == 4 * 23528522 == sum(variables.ps_bytes)
    largest = max(math.prod(g.shape.as_list()) * 4 for _, g in pairs)
    assert abs(placed[ps[0]] - placed[ps[1]]) <= largest  # greedy by size: within one variable
