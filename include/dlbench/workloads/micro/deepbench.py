"""DeepBench-style kernels through TensorFlow ops (study 003): what the framework really dispatches.

GEMM, convolution (forward and backward), RNN (vanilla, LSTM, GRU; forward and backward) and
all-reduce across the devices of one host. Shapes: a selection of DeepBench's published training
kernels (``paper``) or tiny ones (``smoke``). Each kernel reports time per op and TFLOPS.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from dlbench.workloads.profiles import DeepBenchSpec
from dlbench.workloads.result import ResultDocument

# DeepBench training kernels (baidu-research/DeepBench, kernels/*.h), a representative subset.
GEMM = {"paper": [(1760, 128, 1760), (2560, 64, 2560), (4096, 16, 4096), (5124, 700, 2048), (35, 700, 2048)],
        "smoke": [(64, 16, 64), (128, 32, 64)]}
# (W, H, C, N, K, R, S, pad_h, pad_w, stride_h, stride_w)
CONV = {"paper": [(700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2), (341, 79, 32, 4, 32, 10, 5, 0, 0, 2, 2),
                  (112, 112, 64, 8, 64, 1, 1, 0, 0, 1, 1), (56, 56, 64, 16, 256, 1, 1, 0, 0, 1, 1),
                  (28, 28, 128, 16, 128, 3, 3, 1, 1, 1, 1), (7, 7, 512, 16, 512, 3, 3, 1, 1, 1, 1)],
        "smoke": [(16, 16, 3, 2, 8, 3, 3, 1, 1, 1, 1), (8, 8, 8, 2, 8, 1, 1, 0, 0, 1, 1)]}
# (hidden, batch, timesteps, cell)
RNN = {"paper": [(1760, 16, 50, "vanilla"), (2560, 32, 50, "vanilla"), (512, 16, 25, "lstm"), (1024, 32, 25, "lstm"),
                 (512, 32, 1, "gru"), (1024, 16, 25, "gru")],
       "smoke": [(32, 4, 4, "vanilla"), (32, 4, 4, "lstm"), (32, 4, 4, "gru")]}
ALLREDUCE = {"paper": [100_000, 3_097_600, 4_194_304, 16_777_216], "smoke": [1024, 65536]}
GATES = {"vanilla": 1, "lstm": 4, "gru": 3}


def timed(fn: Callable[[], Any], iterations: int) -> float:
    """Seconds per call after one warm-up; each call's result is read back (synchronizes the device)."""
    fn()
    start = time.perf_counter()
    for _ in range(iterations):
        result = fn()
    _ = result.numpy() if hasattr(result, "numpy") else result
    return (time.perf_counter() - start) / iterations


def _sync(tensors: Any) -> Any:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    return tf.add_n([tf.reduce_sum(t) for t in tf.nest.flatten(tensors)])


def run_gemm(doc: ResultDocument, shapes: list[tuple[int, int, int]], iterations: int) -> None:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    for m, n, k in shapes:
        a, b = tf.random.normal((m, k)), tf.random.normal((k, n))
        seconds = timed(tf.function(lambda a=a, b=b: tf.reduce_sum(tf.matmul(a, b))), iterations)
        doc.add("deepbench_time", seconds * 1e3, "ms", kernel="gemm", shape=f"{m}x{n}x{k}")
        doc.add("deepbench_tflops", 2 * m * n * k / seconds / 1e12, "TFLOPS", kernel="gemm", shape=f"{m}x{n}x{k}")


def run_conv(doc: ResultDocument, shapes: Sequence[tuple[int, ...]], iterations: int) -> None:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    for w, h, c, n, k, r, s, pad_h, pad_w, stride_h, stride_w in shapes:
        x = tf.random.normal((n, h + 2 * pad_h, w + 2 * pad_w, c))
        f = tf.Variable(tf.random.normal((r, s, c, k)))
        out_h, out_w = (h + 2 * pad_h - r) // stride_h + 1, (w + 2 * pad_w - s) // stride_w + 1
        flops = 2.0 * n * k * c * r * s * out_h * out_w
        shape = f"W{w}xH{h}xC{c}xN{n}xK{k}xR{r}xS{s}"

        @tf.function
        def forward(x: Any = x, f: Any = f, sh: int = stride_h, sw: int = stride_w) -> Any:
            return tf.reduce_sum(tf.nn.conv2d(x, f, strides=(1, sh, sw, 1), padding="VALID"))

        @tf.function
        def backward(x: Any = x, f: Any = f, sh: int = stride_h, sw: int = stride_w) -> Any:
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = tf.nn.conv2d(x, f, strides=(1, sh, sw, 1), padding="VALID")
            return _sync(tape.gradient(y, [x, f]))

        for direction, fn, work in (("forward", forward, flops), ("backward", backward, 2 * flops)):
            seconds = timed(fn, iterations)
            doc.add("deepbench_time", seconds * 1e3, "ms", kernel="conv", shape=shape, direction=direction)
            doc.add("deepbench_tflops", work / seconds / 1e12, "TFLOPS", kernel="conv", shape=shape,
                    direction=direction)


def run_rnn(doc: ResultDocument, shapes: list[tuple[int, int, int, str]], iterations: int) -> None:
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    layers = {"vanilla": tf.keras.layers.SimpleRNN, "lstm": tf.keras.layers.LSTM, "gru": tf.keras.layers.GRU}
    for hidden, batch, steps, cell in shapes:
        layer = layers[cell](hidden, return_sequences=True)
        x = tf.random.normal((batch, steps, hidden))
        layer(x)  # build
        flops = steps * GATES[cell] * 2.0 * (2 * hidden * hidden * batch)
        shape = f"h{hidden}xb{batch}xt{steps}"

        @tf.function
        def forward(layer: Any = layer, x: Any = x) -> Any:
            return tf.reduce_sum(layer(x))

        @tf.function
        def backward(layer: Any = layer, x: Any = x) -> Any:
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(layer(x))
            return _sync(tape.gradient(y, layer.trainable_variables))

        for direction, fn, work in (("forward", forward, flops), ("backward", backward, 2 * flops)):
            seconds = timed(fn, iterations)
            doc.add("deepbench_time", seconds * 1e3, "ms", kernel=f"rnn_{cell}", shape=shape, direction=direction)
            doc.add("deepbench_tflops", work / seconds / 1e12, "TFLOPS", kernel=f"rnn_{cell}", shape=shape,
                    direction=direction)


def run_allreduce(doc: ResultDocument, sizes: list[int], iterations: int) -> None:
    """All-reduce across this host's GPUs (NCCL), or across two logical CPU devices without GPUs."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus] if len(gpus) > 1 else [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(devices) < 2:
        doc.add("deepbench_allreduce_devices", len(devices), "count", note="not available: fewer than 2 devices")
        return
    kind = "gpu" if len(gpus) > 1 else "cpu_logical"
    strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=(
        tf.distribute.NcclAllReduce() if kind == "gpu" else tf.distribute.ReductionToOneDevice()))
    for size in sizes:
        values = strategy.experimental_distribute_values_from_function(lambda ctx, size=size: tf.ones((size,)))

        @tf.function
        def allreduce(values: Any = values) -> Any:
            return strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)

        seconds = timed(allreduce, iterations)
        doc.add("deepbench_time", seconds * 1e3, "ms", kernel="allreduce", floats=size, devices=len(devices),
                device_kind=kind)
        # Bus bandwidth as nccl-tests defines it: 2 (n-1)/n * bytes / time.
        busbw = 2 * (len(devices) - 1) / len(devices) * size * 4 / seconds / 1e9
        doc.add("deepbench_allreduce_busbw", busbw, "GB/s", floats=size, devices=len(devices), device_kind=kind)


def configure_logical_cpus() -> None:
    """Two logical CPU devices when the host has no GPUs, so the all-reduce path is exercised."""
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    if not tf.config.list_physical_devices("GPU"):
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def run(doc: ResultDocument, spec: DeepBenchSpec) -> None:
    configure_logical_cpus()
    import tensorflow as tf  # heavy: TensorFlow takes seconds to import; only running the kernels needs it

    doc.environment.versions["tensorflow"] = tf.__version__
    run_gemm(doc, GEMM[spec.shapes], spec.iterations)
    run_conv(doc, CONV[spec.shapes], spec.iterations)
    run_rnn(doc, RNN[spec.shapes], spec.iterations)
    run_allreduce(doc, ALLREDUCE[spec.shapes], spec.iterations)
