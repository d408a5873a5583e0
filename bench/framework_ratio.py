"""Are our PyTorch and JAX runners as fast as the plainest idiomatic loop of their framework?

Issue 23's speed goal: on the same network (built by the same code: ``torch_nets.build`` /
``jax_trainer.build_model``), batch, image size, warm-up and measured steps, synthetic data,
each runner (``python -m dlbench.workloads tf-cnn --framework F``) against

* PyTorch: a hand-written training loop (``torch.optim.SGD`` with weight decay on the same
  parameters, ``F.cross_entropy``, ``backward``, ``step``, ``loss.item()`` per step);
* JAX: Keras ``fit`` on the JAX backend (``compile(jit_compile=True)``, SGD, sparse categorical
  cross entropy from logits), its per-batch times taken by a callback.

Every run is a fresh process, interleaved A B, then B A (this machine is shared: compare side by
side, never with another day's number). Prints images/s per framework and model and the ratio
runner / plain loop (median of the rounds); the goal is >= 0.97.

    .venv/bin/python bench/framework_ratio.py --frameworks pytorch jax --models resnet50 --batch-size 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("alexnet", "resnet50", "inception3")
FRAMEWORKS = ("pytorch", "jax")


def run_ours(framework: str, model: str, batch: int, warmup: int, steps: int, timeout: float) -> float:
    """One ``tf-cnn --framework`` run at the paper profile's shapes; its images/s."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        args = [sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--framework", framework, "--model", model,
                "--profile", "paper", "--batch-size", str(batch), "--warmup-steps", str(warmup),
                "--measured-steps", str(steps), "--platform", "bare_metal", "--run-id", "framework-ratio",
                "--out", str(out)]
        proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"tf-cnn --framework {framework} {model} failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-3000:]}")
        doc = json.loads(out.read_text())
    return float(next(s["value"] for s in doc["samples"] if s["metric"] == "throughput"))


def run_plain(framework: str, model: str, batch: int, warmup: int, steps: int, timeout: float) -> float:
    """The plain loop in a fresh process (this script with ``--plain``); its images/s."""
    args = [sys.executable, __file__, "--plain", framework, "--models", model, "--batch-size", str(batch),
            "--warmup-steps", str(warmup), "--measured-steps", str(steps)]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"plain {framework} {model} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["images_per_sec"])


def plain_pytorch(model: str, batch: int, warmup: int, steps: int) -> float:
    import torch  # heavy: only the plain PyTorch loop's process needs it
    import torch.nn.functional as F  # noqa: N812 - PyTorch's own idiom

    from dlbench.workloads.cnn import torch_nets
    from dlbench.workloads.profiles import get_profile

    spec = get_profile("paper").training(model).model_copy(update={"batch_size_per_device": batch})
    net = torch_nets.build(model, spec)
    net.train()
    decayed = {id(p) for p in torch_nets.l2_parameters(net)}
    groups = [{"params": [p for p in net.parameters() if id(p) in decayed], "weight_decay": 4e-5},
              {"params": [p for p in net.parameters() if id(p) not in decayed], "weight_decay": 0.0}]
    optimizer = torch.optim.SGD(groups, lr=spec.learning_rate)
    images = torch.rand(batch, 3, spec.image_size, spec.image_size)
    labels = torch.randint(0, spec.num_classes, (batch,))
    times = []
    for _ in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(net(images), labels)
        loss.backward()
        optimizer.step()
        loss.item()
        times.append(time.perf_counter() - start)
    return steps * batch / sum(times[warmup:])


def plain_jax(model: str, batch: int, warmup: int, steps: int) -> float:
    os.environ["KERAS_BACKEND"] = "jax"
    import keras  # heavy: only the plain Keras-on-JAX process needs it
    import numpy as np  # heavy enough: only this process needs it

    from dlbench.workloads.cnn import jax_trainer
    from dlbench.workloads.profiles import get_profile

    spec = get_profile("paper").training(model).model_copy(update={"batch_size_per_device": batch})
    net = jax_trainer.build_model(model, spec)
    net.compile(optimizer=keras.optimizers.SGD(learning_rate=spec.learning_rate),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    rng = np.random.default_rng(0)
    x = rng.random((batch, spec.image_size, spec.image_size, 3), dtype=np.float32)
    y = rng.integers(0, spec.num_classes, (batch,))
    x, y = np.repeat(x, warmup + steps, axis=0), np.tile(y, warmup + steps)
    ends: list[float] = []

    class Clock(keras.callbacks.Callback):
        """The measured window: from the end of the last warm-up step to the end of the last step.
        Reading the loss waits for the step's device work (JAX dispatches asynchronously: a
        callback's time alone would miss steps still in flight, flattering the plain loop)."""

        def on_train_batch_end(self, index: int, logs: dict[str, object] | None = None) -> None:
            if index in (warmup - 1, warmup + steps - 1):
                float((logs or {})["loss"])  # type: ignore[arg-type]  # a device scalar or a float: both convert
                ends.append(time.perf_counter())

    net.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0, callbacks=[Clock()])
    return steps * batch / (ends[1] - ends[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=8, help="per run, both sides (paper: 32/32/512)")
    parser.add_argument("--warmup-steps", type=int, default=3, help="at least 1 (the plain loops' clocks start there)")
    parser.add_argument("--measured-steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2, help="A B pairs per framework and model")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    parser.add_argument("--plain", choices=FRAMEWORKS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain:  # the child process of run_plain
        loop = plain_pytorch if args.plain == "pytorch" else plain_jax
        value = loop(args.models[0], args.batch_size, args.warmup_steps, args.measured_steps)
        print(json.dumps({"images_per_sec": value}))
        return 0

    results: dict[str, dict[str, dict[str, object]]] = {}
    print(f"{'framework':<9} {'model':<11} {'round':>5} {'ours img/s':>11} {'plain img/s':>12}", flush=True)
    for framework in args.frameworks:
        for model in args.models:
            ours: list[float] = []
            plain: list[float] = []
            for index in range(args.rounds):
                for side in ("ours", "plain") if index % 2 == 0 else ("plain", "ours"):
                    run = run_ours if side == "ours" else run_plain
                    value = run(framework, model, args.batch_size, args.warmup_steps, args.measured_steps,
                                args.timeout)
                    (ours if side == "ours" else plain).append(value)
                print(f"{framework:<9} {model:<11} {index + 1:>5} {ours[-1]:>11.2f} {plain[-1]:>12.2f}", flush=True)
            results.setdefault(framework, {})[model] = {
                "ours": ours, "plain": plain, "ratio": statistics.median(ours) / statistics.median(plain)}
    print(f"\nmedians (goal: ours/plain >= 0.97)\n{'framework':<9} {'model':<11} {'ours img/s':>11} "
          f"{'plain img/s':>12} {'ours/plain':>11}")
    for framework, by_model in results.items():
        for model, r in by_model.items():
            print(f"{framework:<9} {model:<11} {statistics.median(r['ours']):>11.2f} "  # type: ignore[arg-type]
                  f"{statistics.median(r['plain']):>12.2f} {r['ratio']:>11.3f}")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps({"batch_size": args.batch_size, "warmup_steps": args.warmup_steps,
                                         "measured_steps": args.measured_steps, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
