"""Issue 24's GPU proof for the transformer suite: GPT-2 small trained and decoded on a GPU machine.

Two parts, both needing only PyTorch (the GPU machine has no TensorFlow and no package index):

1. The workload as the controller runs it: ``python -m dlbench.workloads transformer --task train``
   and ``--task generate`` at the ``paper`` profile (GPT-2 small: 12 x 768, context 1024,
   vocabulary 50257, batch 8) for each precision (fp32 with TF32 off, tf32, bf16 autocast), each a
   fresh process; one markdown row per run: tokens/s, median step, MFU against the peak GEMM the
   job measured (and which GEMM), peak device memory, time to first token, inter-token latency.
   A precision the machine cannot do is a row saying why, not a crash.
2. The speed goal: the workload's training step (:class:`train.Trainer`, timed by the runner's
   :func:`timed_steps`) against a plain hand-written PyTorch loop of the same model (built by
   :func:`model.build`; AdamW, cross entropy, backward, clipping, ``loss.item()``), in THIS one
   process, interleaved A B A B so drift falls on both; the ratio of the medians, goal >= 0.97.

    python bench/gpu_transformer.py --json $OUT/gpu_transformer.json
    .venv/bin/python bench/gpu_transformer.py --smoke      # on a CPU: the smoke profile, a few steps
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PRECISIONS = ("fp32", "tf32", "bf16")
TASKS = ("train", "generate")
GOAL = 0.97


def run_workload(task: str, precision: str, profile: str, warmup: int, steps: int, timeout: float) -> dict[str, Any]:
    """One ``transformer`` job in a fresh process; what its document says."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        argv = [sys.executable, "-m", "dlbench.workloads", "transformer", "--task", task, "--profile", profile,
                "--precision", precision, "--run-id", "gpu-proof", "--out", str(out)]
        if task == "train":
            argv += ["--warmup-steps", str(warmup), "--measured-steps", str(steps)]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
        if not out.exists():
            return {"task": task, "precision": precision, "status": "no document", "error": proc.stderr[-400:]}
        doc = json.loads(out.read_text())
    values: dict[str, float] = {}
    labels: dict[str, dict[str, Any]] = {}
    measured_steps = []
    for s in doc["samples"]:
        if s["metric"] == "step_time":
            if not s["labels"].get("warmup"):
                measured_steps.append(float(s["value"]))
        elif s["metric"] == "peak_memory" and s["labels"].get("scope") != "device":
            continue
        else:
            values.setdefault(s["metric"], float(s["value"]))
            labels.setdefault(s["metric"], s["labels"])
    return {"task": task, "precision": precision, "status": doc["status"], "error": (doc.get("error") or "")[:300],
            "tokens_per_sec": values.get("throughput"),
            "step_median": statistics.median(measured_steps) if measured_steps else None,
            "mfu": values.get("mfu"), "model_tflops": values.get("model_tflops"),
            "peak_gemm": values.get("peak_gemm"), "peak_gemm_source": labels.get("peak_gemm", {}).get("source"),
            "peak_device_bytes": values.get("peak_memory"), "ttft": values.get("time_to_first_token"),
            "itl": values.get("inter_token_latency"), "setup_s": values.get("setup_time"),
            "parameters": doc["labels"].get("model_parameters"), "device": doc["labels"].get("device"),
            "versions": doc["environment"].get("versions", {}),
            "gpus": [g.get("name") for g in doc["environment"].get("gpus", [])]}


def _cell(value: Any, fmt: str, scale: float = 1.0) -> str:
    return format(value * scale, fmt) if isinstance(value, int | float) else "-"


def workload_table(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    print("| task | precision | tokens/s | median step (ms) | MFU | peak GEMM (TFLOPS, shape) | TTFT (ms) "
          "| inter-token (ms) | peak device memory (GiB) | status |\n|---|---|---|---|---|---|---|---|---|---|",
          flush=True)
    for task in args.tasks:
        for precision in args.precisions:
            row = run_workload(task, precision, args.profile, args.warmup_steps, args.measured_steps, args.timeout)
            rows.append(row)
            status = row["status"] if row["status"] == "ok" else f"{row['status']}: {row.get('error', '')[:80]}"
            gemm = f"{row['peak_gemm']:.3g} ({row['peak_gemm_source']})" if row.get("peak_gemm") else "-"
            print(f"| {task} | {precision} | {_cell(row.get('tokens_per_sec'), '.0f')} | "
                  f"{_cell(row.get('step_median'), '.1f', 1e3)} | {_cell(row.get('mfu'), '.3f')} | {gemm} | "
                  f"{_cell(row.get('ttft'), '.1f', 1e3)} | {_cell(row.get('itl'), '.2f', 1e3)} | "
                  f"{_cell(row.get('peak_device_bytes'), '.2f', 1 / 2**30)} | {status} |", flush=True)
    return rows


# --- the plain loop against the workload's step, in this process ---------------------------------------------


def ratio_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    from dlbench.workloads.profiles import Precision  # after argument parsing: --help stays instant

    rows = []
    print(f"\n| precision | workload tokens/s | plain loop tokens/s | ratio (goal >= {GOAL}) | rounds |\n"
          "|---|---|---|---|---|", flush=True)
    for name in args.precisions:
        row = ratio_one(Precision(name), args)
        rows.append(row)
        if row["status"] != "ok":
            print(f"| {name} | - | - | - | refused: {row['error'][:80]} |", flush=True)
            continue
        a, b, ratio = statistics.median(row["workload"]), statistics.median(row["plain"]), row["ratio"]
        print(f"| {name} | {a:.0f} | {b:.0f} | {ratio:.3f} {'ok' if ratio >= GOAL else 'BELOW GOAL'} | "
              f"{args.rounds} |", flush=True)
    return rows


def ratio_one(precision: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The workload's step and the plain loop at ``precision``, A B A B, in this process."""
    import torch  # heavy: only the ratio part needs PyTorch in this process
    import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention

    from dlbench.workloads.cnn.torch_trainer import local_devices, set_precision
    from dlbench.workloads.profiles import Precision, get_profile
    from dlbench.workloads.training.measure import timed_steps
    from dlbench.workloads.transformer import model, train

    device_type, _ = local_devices()
    device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
    spec = get_profile(args.profile).transformer.model_copy(update={
        "precision": precision, "warmup_steps": args.warmup_steps, "measured_steps": args.measured_steps})
    try:
        set_precision(precision, device_type)
    except RuntimeError as exc:
        return {"precision": precision.value, "status": "refused", "error": str(exc)}
    tokens = spec.batch_size * spec.context
    ours = train.Trainer(spec, device, seed=0, ddp=False)

    torch.manual_seed(0)
    net = model.build(spec).to(device)
    net.train()
    matrices = [p for p in net.parameters() if p.dim() >= 2]
    others = [p for p in net.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": 0.1}, {"params": others, "weight_decay": 0.0}],
        lr=spec.learning_rate, betas=(0.9, 0.95), **({"fused": True} if device.type == "cuda" else {}))
    generator = torch.Generator(device=device)
    generator.manual_seed(0)
    ids = torch.randint(0, spec.vocabulary, (spec.batch_size, spec.context + 1), generator=generator, device=device)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    bf16 = precision is Precision.BF16

    def plain_step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = net(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        loss.item()

    def rate(step: Any) -> float:
        times = timed_steps(step, spec.warmup_steps + spec.measured_steps, time.perf_counter)
        return spec.measured_steps * tokens / sum(times[spec.warmup_steps:])

    a: list[float] = []
    b: list[float] = []
    for _ in range(args.rounds):  # A B A B
        a.append(rate(ours.step))
        b.append(rate(plain_step))
    if device.type == "cuda":
        torch.cuda.synchronize()
    return {"precision": precision.value, "status": "ok", "workload": a, "plain": b,
            "ratio": statistics.median(a) / statistics.median(b)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="the smoke profile and a few steps (checks this script on a CPU in seconds)")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--warmup-steps", type=int, default=None, help="default 10 (smoke: 1)")
    parser.add_argument("--measured-steps", type=int, default=None, help="default 30 (smoke: 3)")
    parser.add_argument("--rounds", type=int, default=2, help="A B rounds of the ratio (each side once per round)")
    parser.add_argument("--skip-ratio", action="store_true")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.profile = "smoke" if args.smoke else "paper"
    args.warmup_steps = args.warmup_steps or (1 if args.smoke else 10)
    args.measured_steps = args.measured_steps or (3 if args.smoke else 30)
    result: dict[str, Any] = {"profile": args.profile, "workload": workload_table(args)}
    if not args.skip_ratio:
        result["ratio"] = ratio_rows(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
