"""Issue 23's GPU proof: the PyTorch and JAX runners at the paper profile on a GPU machine.

Runs ``tf-cnn --framework F --model M --profile paper --precision P`` for every framework, model
(InceptionV3 32, ResNet-50 32, AlexNet 512 per GPU: Table 1) and precision (fp32, tf32, bf16),
each in a fresh process, and prints one markdown row per run (images/s, median step, setup,
peak device memory, what the document says ran), ready for docs/gpus.md. A precision the GPU
cannot do (tf32 before Ampere) is a row saying why, not a crash. The ratios against the plain
loops are ``bench/framework_ratio.py`` (run it in the same call, on the same warm machine).

    python bench/gpu_frameworks.py --json $OUT/gpu_frameworks.json --measured-steps 50
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("pytorch", "jax")
MODELS = ("inception3", "resnet50", "alexnet")
PRECISIONS = ("fp32", "tf32", "bf16")


def run(framework: str, model: str, precision: str, warmup: int, steps: int, timeout: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        argv = [sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--framework", framework, "--model", model,
                "--profile", "paper", "--precision", precision, "--warmup-steps", str(warmup),
                "--measured-steps", str(steps), "--run-id", "gpu-proof", "--out", str(out)]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
        if not out.exists():
            return {"framework": framework, "model": model, "precision": precision, "status": "no document",
                    "error": proc.stderr[-400:]}
        doc = json.loads(out.read_text())
    samples: dict[str, list[float]] = {}
    for s in doc["samples"]:
        if s["metric"] != "step_time" or not s["labels"].get("warmup"):
            samples.setdefault(s["metric"], []).append(float(s["value"]))
    labels = doc.get("labels", {})
    return {"framework": framework, "model": model, "precision": precision, "status": doc["status"],
            "error": (doc.get("error") or "")[:300], "images_per_sec": (samples.get("throughput") or [None])[0],
            "step_median": statistics.median(samples["step_time"]) if samples.get("step_time") else None,
            "setup_s": (samples.get("setup_time") or [None])[0],
            "peak_device_bytes": max(samples.get("peak_memory") or [0]),
            "batch": labels.get("global_batch_size"), "backend": labels.get("backend"),
            "placement": labels.get("placement"), "versions": doc["environment"].get("versions", {}),
            "gpus": [g.get("name") for g in doc["environment"].get("gpus", [])]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--measured-steps", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    print("| framework | model | precision | images/s | median step (ms) | setup (s) | peak device memory (GiB) "
          "| global batch | status |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for framework in args.frameworks:
        for model in args.models:
            for precision in args.precisions:
                row = run(framework, model, precision, args.warmup_steps, args.measured_steps, args.timeout)
                rows.append(row)
                ips, step, setup = row.get("images_per_sec"), row.get("step_median"), row.get("setup_s")
                peak = float(row.get("peak_device_bytes") or 0) / 2**30  # type: ignore[arg-type]
                status = row["status"] if row["status"] == "ok" else f"{row['status']}: {row.get('error', '')[:80]}"  # type: ignore[index]
                print(f"| {framework} | {model} | {precision} | {ips:.1f} | {step * 1000:.1f} | {setup:.1f} | "  # type: ignore[operator]
                      f"{peak:.2f} | {row.get('batch')} | {status} |" if ips else
                      f"| {framework} | {model} | {precision} | - | - | - | - | - | {status} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
