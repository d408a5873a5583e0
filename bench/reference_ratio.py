"""Is our runner as fast as the study's harness? dlbench's tf-cnn vs tf_cnn_benchmarks, side by side.

The study timed tf_cnn_benchmarks (tensorflow/benchmarks, ``scripts/tf_cnn_benchmarks``). It is not
on PyPI and is not vendored here: point ``--reference`` at a checkout (the repository root or its
``scripts/tf_cnn_benchmarks``). Under TF 2.16+ it needs Keras 2 (the ``tf_keras`` package,
``TF_USE_LEGACY_KERAS=1``: it uses ``tf.compat.v1`` layers and ``tf.nn.rnn_cell``); tf-keras's wheel
requires the ``tensorflow`` distribution, which would pull the CUDA build over this project's
tensorflow-cpu, so give the reference its own interpreter with ``--python``. One way that reuses
the project's TensorFlow without touching .venv::

    python3.11 -m venv /tmp/refvenv
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/refvenv/lib/python3.11/site-packages/project.pth
    /tmp/refvenv/bin/pip install --no-deps 'tf-keras~=2.21.0'    # the TF version of .venv

Both run the same model at the harness's shapes (AlexNet 227, ResNet-50 224, InceptionV3 299,
1001 classes), the same batch, warm-up and measured steps, synthetic data, NHWC, SGD with the
same learning rate and weight decay, parameters on the CPU; each in a fresh process, interleaved
A B B A (this machine is shared: compare side by side, never against a number of another day).
Prints images/s per model and the ratio ours / reference; the goal is >= 1.00 per model.

    .venv/bin/python bench/reference_ratio.py --reference /tmp/tfbench --python /tmp/refvenv/bin/python \\
        --models alexnet --batch-size 16 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("alexnet", "resnet50", "inception3")
TOTAL = re.compile(r"total images/sec:\s*([0-9.]+)")


def reference_script(path: Path) -> Path:
    """``tf_cnn_benchmarks.py`` inside a checkout (its root or the script's directory)."""
    for candidate in (path / "tf_cnn_benchmarks.py", path / "scripts" / "tf_cnn_benchmarks" / "tf_cnn_benchmarks.py"):
        if candidate.is_file():
            return candidate
    raise SystemExit(f"--reference {path}: no tf_cnn_benchmarks.py there or under scripts/tf_cnn_benchmarks/")


def run_reference(python: str, script: Path, model: str, batch: int, warmup: int, steps: int,
                  learning_rate: float, timeout: float) -> float:
    """One tf_cnn_benchmarks run with the study's single-instance CPU options; its images/s."""
    args = [python, script.name, "--device=cpu", "--data_format=NHWC", f"--model={model}", f"--batch_size={batch}",
            f"--num_batches={steps}", f"--num_warmup_batches={warmup}", "--optimizer=sgd",
            f"--init_learning_rate={learning_rate}", "--variable_update=parameter_server",
            "--local_parameter_device=cpu", f"--display_every={max(1, steps)}"]
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(args, cwd=script.parent, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    match = TOTAL.search(proc.stdout)
    if proc.returncode != 0 or not match:
        raise RuntimeError(f"tf_cnn_benchmarks {model} failed (exit {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    return float(match.group(1))


def run_ours(model: str, batch: int, warmup: int, steps: int, timeout: float) -> tuple[float, dict[str, str]]:
    """One ``python -m dlbench.workloads tf-cnn`` run at the paper profile's shapes; its images/s and labels."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        args = [sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", model, "--profile", "paper",
                "--batch-size", str(batch), "--warmup-steps", str(warmup), "--measured-steps", str(steps),
                "--platform", "bare_metal", "--run-id", "reference-ratio", "--out", str(out)]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"dlbench tf-cnn {model} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        doc = json.loads(out.read_text())
    throughput = next(s["value"] for s in doc["samples"] if s["metric"] == "throughput")
    return float(throughput), doc.get("labels", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="tensorflow/benchmarks checkout")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter for the reference (with tf_keras; default: this one)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=8, help="per run, both sides (paper: 32/32/512)")
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="A B pairs per model")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)

    from dlbench.workloads.profiles import get_profile

    script = reference_script(args.reference.resolve())
    results = {}
    print(f"{'model':<11} {'round':>5} {'ours img/s':>11} {'ref img/s':>10}", flush=True)
    for model in args.models:
        learning_rate = get_profile("paper").training(model).learning_rate
        ours, ref = [], []
        labels: dict[str, str] = {}
        for index in range(args.rounds):
            # A B, then B A: a load that drifts during a round burdens both sides alike.
            for side in ("ours", "ref") if index % 2 == 0 else ("ref", "ours"):
                if side == "ours":
                    value, labels = run_ours(model, args.batch_size, args.warmup_steps, args.measured_steps,
                                             args.timeout)
                    ours.append(value)
                else:
                    ref.append(run_reference(args.python, script, model, args.batch_size, args.warmup_steps,
                                             args.measured_steps, learning_rate, args.timeout))
            print(f"{model:<11} {index + 1:>5} {ours[-1]:>11.2f} {ref[-1]:>10.2f}", flush=True)
        results[model] = {"ours": ours, "reference": ref,
                          "ratio": statistics.median(ours) / statistics.median(ref),
                          "diverged": labels.get("diverged", ""), "model_parameters": labels.get("model_parameters")}
    print(f"\nmedians\n{'model':<11} {'ours img/s':>11} {'ref img/s':>10} {'ours/ref':>9}")
    for model, r in results.items():
        print(f"{model:<11} {statistics.median(r['ours']):>11.2f} {statistics.median(r['reference']):>10.2f} "
              f"{r['ratio']:>9.3f}")
    if args.json:
        args.json.write_text(json.dumps({"batch_size": args.batch_size, "warmup_steps": args.warmup_steps,
                                         "measured_steps": args.measured_steps, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
