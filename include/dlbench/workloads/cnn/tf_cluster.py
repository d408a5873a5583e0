"""TensorFlow's CNN training across instances: one process per role, started together by the executor.

Two modes (docs/distributed-training.md):

``distributed_replicated``
    The core study's mode (tf_cnn_benchmarks ``--variable_update=distributed_replicated
    --cross_replica_sync=True``, its ``VariableMgrDistributedReplicated``): between-graph
    replication in TF1 graph mode. Every trainable variable has a global copy on a parameter
    server task (spread over the tasks by size) and a local copy on each of the worker's
    devices. Each step, every worker computes gradients on its local copies, applies them to the
    global variables with SGD (each worker applies its own gradients, as the benchmark does, so
    one step moves the globals by the sum of the workers' updates), passes a token barrier with
    every other worker through FIFO queues on the parameter servers, and then refreshes its local
    copies from the globals. Workers therefore advance in lock-step.
``multi_worker_mirrored``
    The modern synchronous alternative: ``tf.distribute.MultiWorkerMirroredStrategy`` (all-reduce
    of the gradients between workers, no parameter server), running the single-instance runner's
    training loop.

A parameter server starts its TF server and sleeps until SIGTERM. Workers run their training in a
helper thread (:func:`harness.interruptible`): a step blocked at a barrier for a peer that died
must not keep the executor's SIGTERM from writing the document.

Every TF server listens on all interfaces at its port (TF's gRPC server binds the wildcard
address, checked by the tests): in containers with published ports the address in the cluster
spec is the node's, not the container's.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dlbench.workloads import harness
from dlbench.workloads.cnn import tf_data, tf_nets, tf_train
from dlbench.workloads.profiles import DataKind, DistributedMode, ModelName, Precision, TrainingSpec
from dlbench.workloads.result import ResultDocument
from dlbench.workloads.tf_instance import framework_labels
from dlbench.workloads.training.cluster import ClusterRole, run_worker_interruptibly
from dlbench.workloads.training.measure import (
    Clock,
    StepSummary,
    add_loss_samples,
    add_training_samples,
    realtime,
    timed_steps,
)


def _start_server(role: ClusterRole) -> Any:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    server = tf.distribute.Server(tf.train.ClusterSpec(role.cluster), job_name=role.role,
                                  task_index=role.task_index, protocol="grpc", start=True)
    port = role.address.rpartition(":")[2]
    harness.progress(f"{role.role} {role.task_index}: TF server listening on all interfaces, port {port}")
    return server


def run_parameter_server(doc: ResultDocument, role: ClusterRole, *, poll: float = 0.5) -> None:
    """Serve the global variables and barrier queues until SIGTERM, the parameter server's normal end.

    The main thread sleeps in short intervals instead of ``server.join()``: Python runs the
    SIGTERM handler only between bytecodes, never inside join's native wait."""
    started: float | None = None
    server = None
    try:
        server = _start_server(role)
        started = time.monotonic()
        while True:
            time.sleep(poll)
    except harness.Stopped:
        harness.ended_by_stop(doc)
    del server  # kept referenced (serving) until the end
    doc.add("uptime", time.monotonic() - started if started is not None else 0.0, "s", role="ps")


# --- distributed_replicated -------------------------------------------------------------------------------------


@dataclass
class _ReplicatedVariables:
    """VariableMgrDistributedReplicated's variables: a global copy of each trainable variable on
    the least-loaded parameter server (by bytes, in creation order, so every worker places the
    same variable on the same task) and a local copy per tower; non-trainable ones (batch-norm
    moving averages) only local."""

    ps_devices: Sequence[str]
    ps_bytes: list[int] = field(default_factory=list)
    globals: dict[str, Any] = field(default_factory=dict)
    pairs: list[list[tuple[Any, Any]]] = field(default_factory=list)  # per tower: (local, global)

    def factory(self, tower: int, device: str) -> Callable[[str, list[int], Any, bool], Any]:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        if not self.ps_bytes:
            self.ps_bytes = [0] * len(self.ps_devices)
        while len(self.pairs) <= tower:
            self.pairs.append([])
        local_collections = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]

        def variable(name: str, shape: list[int], initializer: Any, trainable: bool) -> Any:
            if not trainable:
                with tf.device(device):
                    return tf.compat.v1.Variable(initializer(shape), name=f"tower{tower}/{name}", trainable=False,
                                                 collections=local_collections, use_resource=True)
            if name not in self.globals:
                task = min(range(len(self.ps_bytes)), key=self.ps_bytes.__getitem__)
                self.ps_bytes[task] += 4 * math.prod(shape)
                with tf.device(self.ps_devices[task]):
                    self.globals[name] = tf.compat.v1.Variable(
                        lambda: initializer(shape), name=f"global/{name}", trainable=False, use_resource=True)
            with tf.device(device):
                local = tf.compat.v1.Variable(tf.zeros(shape), name=f"tower{tower}/local/{name}", trainable=False,
                                              collections=local_collections, use_resource=True)
            self.pairs[tower].append((local, self.globals[name]))
            return local

        return variable


class _Barriers:
    """tf_cnn_benchmarks' ``add_sync_queues_and_barrier``: one FIFO queue per worker on a parameter
    server (shared by name across the workers' graphs); passing the barrier = putting a token in
    every other worker's queue, then taking one token from each other worker out of one's own."""

    def __init__(self, ps_devices: Sequence[str], workers: int, task_index: int) -> None:
        self.ps_devices, self.workers, self.task_index = ps_devices, workers, task_index
        self.count = 0

    def barrier(self, name: str, after: Sequence[Any] = ()) -> Any:
        import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

        self.count += 1
        with tf.device(self.ps_devices[self.count % len(self.ps_devices)]):
            queues = [tf.queue.FIFOQueue(self.workers, [tf.bool], shapes=[[]], shared_name=f"{name}_{i}",
                                         name=f"{name}_queue_{i}") for i in range(self.workers)]
            token = tf.constant(False)
            with tf.control_dependencies(list(after)):
                ops = [tf.no_op()] + [q.enqueue(token) for i, q in enumerate(queues) if i != self.task_index]
            if self.workers > 1:
                ops.append(queues[self.task_index].dequeue_many(self.workers - 1))
            return tf.group(*ops, name=f"{name}_barrier")


@dataclass
class _ReplicatedGraph:
    graph: Any
    train_op: Any
    loss: Any
    init_globals: Any
    uninitialized_globals: Any
    init_locals: Any
    refresh: Any
    measure_barrier: Any
    model_parameters: int


def _tower_inputs(spec: TrainingSpec, data: DataKind, data_dir: str | None, tower: int, device: str,
                  batch: int, iterator: Any) -> tuple[Any, Any]:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    if data is DataKind.SYNTHETIC:
        # Generated once into local variables on the tower's device (tf_cnn_benchmarks' synthetic
        # data): no input pipeline in the step.
        with tf.device(device):
            images = tf.compat.v1.Variable(
                tf.random.uniform([batch, spec.image_size, spec.image_size, 3], seed=tower), trainable=False,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES], name=f"tower{tower}/synthetic_images")
            labels = tf.compat.v1.Variable(
                tf.random.uniform([batch], maxval=spec.num_classes, dtype=tf.int32, seed=tower), trainable=False,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES], name=f"tower{tower}/synthetic_labels")
        return images.read_value(), labels.read_value()
    return iterator.get_next()


def _build_replicated_graph(role: ClusterRole, model_name: ModelName, spec: TrainingSpec, data: DataKind,
                            data_dir: str | None, towers: Sequence[str], worker_cpu: str) -> _ReplicatedGraph:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only a training run needs it

    graph = tf.Graph()
    with graph.as_default():
        ps_devices = [f"/job:ps/replica:0/task:{k}/device:CPU:0" for k in range(role.parameter_servers)]
        variables = _ReplicatedVariables(ps_devices)
        barriers = _Barriers(ps_devices, role.workers, role.task_index)
        batch = spec.batch_size_per_device
        iterator = None
        if data is DataKind.REAL:
            if not data_dir:
                raise ValueError("data 'real' needs --data-dir pointing at ImageNet-format TFRecords")
            with tf.device(worker_cpu):
                # Each worker reads the whole data set: the study replicates it on every node.
                dataset = tf_data.real_dataset(data_dir, batch, spec.image_size, spec.num_classes)
                iterator = tf.compat.v1.data.make_one_shot_iterator(dataset)
        losses, tower_grads, updates = [], [], []
        for tower, device in enumerate(towers):
            with tf.device(worker_cpu):
                images, labels = _tower_inputs(spec, data, data_dir, tower, device, batch, iterator)
            with tf.device(device):
                builder = tf_nets.GraphBuilder(variables.factory(tower, device))
                logits = tf_nets.GRAPH_MODELS[model_name](builder, images, spec.num_classes)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
                # The harness's weight decay: L2 on every non-batch-norm trainable variable.
                loss = loss + builder.weight_decay_loss()
                local_vars = [local for local, _ in variables.pairs[tower]]
                tower_grads.append(tf.gradients(loss, local_vars))
                losses.append(loss)
                updates.extend(builder.updates)
        globals_ = [glob for _, glob in variables.pairs[0]]
        with tf.device(worker_cpu):
            # Gradients of the worker's towers averaged (tf_cnn_benchmarks' use_mean), one per variable.
            grads = [g[0] if len(g) == 1 else tf.add_n(list(g)) / len(g) for g in zip(*tower_grads, strict=True)]
            loss = tf.add_n(losses) / len(losses)
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(spec.learning_rate)
        apply = optimizer.apply_gradients(list(zip(grads, globals_, strict=True)))  # placed with each global
        step_barrier = barriers.barrier("step_sync", [apply])
        with tf.control_dependencies([step_barrier]):
            refresh_after_step = [local.assign(glob.read_value()) for pairs in variables.pairs for local, glob in pairs]
        train_op = tf.group(*refresh_after_step, *updates, name="train_op")
        refresh = tf.group(*[local.assign(glob.read_value()) for pairs in variables.pairs for local, glob in pairs])
        model_parameters = sum(math.prod(g.shape.as_list()) for g in globals_)
        return _ReplicatedGraph(
            graph=graph, train_op=train_op, loss=loss,
            init_globals=tf.compat.v1.variables_initializer(globals_),
            # Only the workers that wait for the chief ask (an unused op would be logged as a mistake).
            uninitialized_globals=None if role.is_chief else tf.compat.v1.report_uninitialized_variables(globals_),
            init_locals=tf.compat.v1.local_variables_initializer(),
            refresh=refresh, measure_barrier=barriers.barrier("measure_sync"),
            model_parameters=model_parameters)


def _worker_devices(role: ClusterRole) -> tuple[list[str], str, str]:
    """(tower devices, the worker's CPU, local_parameter_device): every GPU of the worker, else its CPU."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    worker = f"/job:worker/replica:0/task:{role.task_index}"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return [f"{worker}/device:GPU:{i}" for i in range(len(gpus))], f"{worker}/device:CPU:0", "gpu"
    return [f"{worker}/device:CPU:0"], f"{worker}/device:CPU:0", "cpu"


def train_replicated_worker(
    doc: ResultDocument,
    role: ClusterRole,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
    init_poll: float = 0.2,
) -> StepSummary:
    """One worker of distributed_replicated (graph mode: call ``disable_eager_execution`` first)."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running a model needs it

    t0 = clock()
    if spec.precision is Precision.BF16:
        # The TF1 graph builders have no mixed-precision policy: a bf16 job here would train in
        # fp32 under a bf16 label. Refused, naming the mode that has it.
        raise ValueError("precision bf16 is not available in distributed_replicated (TF1 graph mode); use "
                         "distributed_mode multi_worker_mirrored, or fp32/tf32")
    tf_train.set_precision(spec.precision)  # fp32: TensorFloat-32 off; tf32: on (and checked)
    towers, worker_cpu, local_parameter_device = _worker_devices(role)
    doc.labels.update({"local_parameter_device": local_parameter_device, "replicas": str(len(towers)),
                       "placement": "distributed_replicated",
                       **framework_labels(local_parameter_device == "gpu")})
    server = _start_server(role)
    built = _build_replicated_graph(role, model_name, spec, data, data_dir, towers, worker_cpu)
    local_batch = spec.batch_size_per_device * len(towers)
    doc.labels.update({"model_parameters": str(built.model_parameters),
                       "global_batch_size": str(local_batch * role.workers)})
    # Only the parameter servers and this worker: a worker that ended (or has not started) is
    # none of this session's business.
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{role.task_index}"],
                                      allow_soft_placement=True)
    name = f"worker {role.task_index}"
    with tf.compat.v1.Session(server.target, graph=built.graph, config=config) as session:
        if role.is_chief:
            session.run(built.init_globals)
            harness.progress(f"{name}: global variables initialised on the parameter server(s)")
        else:
            harness.progress(f"{name}: waiting for the chief (worker 0) to initialise the global variables")
            while len(session.run(built.uninitialized_globals)):
                time.sleep(init_poll)
        session.run(built.init_locals)
        session.run(built.refresh)
        setup_seconds = clock() - t0
        losses: list[float] = []

        def step() -> None:
            losses.append(float(session.run([built.train_op, built.loss])[1]))

        harness.progress(f"{name}: warm-up ({spec.warmup_steps} steps)")
        step_times = timed_steps(step, spec.warmup_steps, clock)
        harness.progress(f"{name}: at the barrier before the measured steps")
        session.run(built.measure_barrier)
        window_start = realtime()
        step_times += timed_steps(step, spec.measured_steps, clock)
        window_end = realtime()
        harness.progress(f"{name}: {spec.measured_steps} measured steps done")
    labels = {"model": model_name.value, "data": data.value, "batch_size": local_batch}
    summary = add_training_samples(doc, step_times=step_times, warmup_steps=spec.warmup_steps,
                                   images_per_step=local_batch, setup_seconds=setup_seconds,
                                   window=(window_start, window_end), labels=labels)
    # Divergence is a property of the run, not a failure of the timing (as in the single-instance runner).
    add_loss_samples(doc, losses, spec.num_classes, **labels)
    return summary


# --- multi_worker_mirrored --------------------------------------------------------------------------------------


def train_mirrored_worker(
    doc: ResultDocument,
    role: ClusterRole,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
    clock: Clock = time.perf_counter,
) -> StepSummary:
    """One worker of MultiWorkerMirroredStrategy, configured in-process from the cluster arguments
    (TF_CONFIG must be set before TensorFlow creates its context: call this before any TF op)."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": role.cluster,
                                          "task": {"type": "worker", "index": role.task_index}})
    import tensorflow as tf  # heavy: seconds to import; only a worker needs it (here, after TF_CONFIG is set)

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    port = role.address.rpartition(":")[2]
    harness.progress(f"worker {role.task_index}: multi-worker strategy up (all interfaces, port {port})")
    doc.labels["local_parameter_device"] = "gpu" if tf.config.list_logical_devices("GPU") else "cpu"

    @tf.function
    def all_reduce_barrier() -> Any:
        def one() -> Any:
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(1.0))

        return strategy.run(one)

    def barrier() -> None:
        harness.progress(f"worker {role.task_index}: at the barrier before the measured steps")
        all_reduce_barrier()

    summary = tf_train.train(doc, model_name=model_name, spec=spec, data=data, data_dir=data_dir, clock=clock,
                           strategy=(strategy, "multi_worker_mirrored"), before_measured=barrier)
    harness.progress(f"worker {role.task_index}: {spec.measured_steps} measured steps done")
    return summary


def run_role(
    doc: ResultDocument,
    role: ClusterRole,
    *,
    model_name: ModelName,
    spec: TrainingSpec,
    data: DataKind,
    data_dir: str | None = None,
) -> None:
    """This process's whole part of a TensorFlow job across instances: a parameter server serves
    until SIGTERM; a worker trains in its mode (distributed_replicated: TF1 graph mode, set for the
    whole process before any TF op and before the helper thread, which takes its execution mode
    from this default; multi_worker_mirrored: the single-instance loop on the job's strategy)."""
    if role.role == "ps":
        run_parameter_server(doc, role)
    elif DistributedMode(role.mode) is DistributedMode.DISTRIBUTED_REPLICATED:
        import tensorflow as tf  # heavy: seconds to import; only a training role needs it

        tf.compat.v1.disable_eager_execution()
        run_worker_interruptibly(doc, lambda d: train_replicated_worker(d, role, model_name=model_name, spec=spec,
                                                                        data=data, data_dir=data_dir))
    else:
        run_worker_interruptibly(doc, lambda d: train_mirrored_worker(d, role, model_name=model_name, spec=spec,
                                                                      data=data, data_dir=data_dir))
