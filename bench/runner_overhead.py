"""Does our harness cost anything? dlbench's TF runner vs a plain Keras ``model.fit``.

Same model, same batch, same synthetic batch reused every step, same warm-up/measured split,
interleaved rounds in one process (this machine is noisy: compare side by side, never against a
number measured another day). Prints images/s for both and the ratio ours / keras; the goal is
ratio >= 1.0 (within noise), i.e. measuring adds nothing.

    .venv/bin/python bench/runner_overhead.py --model alexnet --profile smoke --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def keras_fit_images_per_sec(model_name: str, spec, batch_size: int) -> float:  # noqa: ANN001
    import tensorflow as tf

    from dlbench.workloads.cnn import tf_data, tf_nets

    model = tf_nets.build(model_name, spec)
    model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=spec.learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    images, labels = tf_data.synthetic_batch(batch_size, spec.image_size, spec.num_classes)
    dataset = tf.data.Dataset.from_tensors((images, labels)).repeat()
    times: list[float] = []

    class StepTimer(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):  # noqa: ANN001
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):  # noqa: ANN001
            times.append(time.perf_counter() - self.start)

    total = spec.warmup_steps + spec.measured_steps
    model.fit(dataset, steps_per_epoch=total, epochs=1, verbose=0, callbacks=[StepTimer()])
    measured = times[spec.warmup_steps:]
    return len(measured) * batch_size / sum(measured)


def ours_images_per_sec(model_name: str, spec) -> float:  # noqa: ANN001
    from dlbench.workloads.cnn import tf_train
    from dlbench.workloads.profiles import DataKind, ModelName
    from dlbench.workloads.result import Benchmark, Environment, ResultDocument

    doc = ResultDocument(benchmark=Benchmark(suite="tf_cnn", name=model_name), environment=Environment(hostname="b"))
    return tf_train.train(doc, model_name=ModelName(model_name), spec=spec, data=DataKind.SYNTHETIC).images_per_sec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="alexnet", choices=["inception3", "resnet50", "alexnet"])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measured-steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=3)
    args = parser.parse_args()

    from dlbench.workloads.profiles import get_profile

    spec = get_profile(args.profile).training(args.model).model_copy(
        update={"measured_steps": args.measured_steps, "warmup_steps": args.warmup_steps})
    ours, keras = [], []
    for round_ in range(args.rounds):
        # Alternate the order so neither side always runs on a warmer machine.
        pair = [("ours", lambda: ours_images_per_sec(args.model, spec)),
                ("keras", lambda: keras_fit_images_per_sec(args.model, spec, spec.batch_size_per_device))]
        for name, fn in pair if round_ % 2 == 0 else reversed(pair):
            value = fn()
            (ours if name == "ours" else keras).append(value)
            print(f"round {round_ + 1} {name:5s} {value:8.2f} images/s", flush=True)
    o, k = statistics.median(ours), statistics.median(keras)
    print(f"\n{args.model} ({args.profile}, batch {spec.batch_size_per_device}, image {spec.image_size}px, "
          f"{spec.measured_steps} measured steps, {args.rounds} rounds)")
    print(f"dlbench runner : {o:8.2f} images/s (median)")
    print(f"keras model.fit: {k:8.2f} images/s (median)")
    print(f"ratio ours/keras: {o / k:.3f} (goal >= 1.0)")


if __name__ == "__main__":
    main()
