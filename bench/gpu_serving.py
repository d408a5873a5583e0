"""Issue 41's GPU check for the serving suite: vLLM's CUDA build serving Llama 3.1 8B's shape (random
weights) on one GPU, through the workload's own command line, at the ``paper`` profile.

Needs vLLM's CUDA wheel installed on the GPU machine (``pip install vllm``: the device machine of
this project has PyTorch but no vLLM and no package index, so it cannot run there; see
docs/gpus.md). Prints one markdown row per load point and the capacity against MLPerf's server
limits (TTFT p99 2 s, TPOT p99 100 ms), and writes the document.

    python bench/gpu_serving.py --json $OUT/gpu_serving.json
    python bench/gpu_serving.py --profile smoke        # the toy model: the same path in a minute
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from dlbench.workloads.result import ResultDocument  # noqa: E402 - after the path above


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--json", type=Path, default=None, help="write the rows and the document here")
    args = parser.parse_args()
    if importlib.util.find_spec("vllm") is None:
        print("vLLM is not installed here (pip install vllm: its CUDA wheel); nothing measured", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "serving.json"
        proc = subprocess.run([sys.executable, "-m", "dlbench.workloads", "serving", "--profile", args.profile,
                               "--platform", "bare_metal", "--out", str(out)], cwd=ROOT, check=False, text=True,
                              capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "include")})
        if not out.exists():
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        doc = ResultDocument.read(out)
    rows = ["| load | requests/s | output tokens/s | TTFT p99 (ms) | TPOT p99 (ms) | goodput |",
            "|---|---|---|---|---|---|"]
    points = sorted({tuple(sorted(s.labels.items())) for s in doc.samples if "load" in s.labels})
    for labels in points:
        named = dict(labels)
        rows.append(f"| {named.get('load')} {named.get('concurrency', named.get('rate'))} | "
                    f"{doc.sample('request_throughput', **named).value:.2f} | "
                    f"{doc.sample('output_throughput', **named).value:.0f} | "
                    f"{doc.sample('ttft_p99', **named).value * 1000:.0f} | "
                    f"{doc.sample('tpot_p99', **named).value * 1000:.1f} | "
                    f"{doc.sample('goodput', **named).value:.2f} |")
    error = f": {(doc.error or '')[:500]}" if doc.error else ""
    summary = (f"status {doc.status.value}{error}; GPUs {[g.name for g in doc.environment.gpus]}; start-up "
               + (f"{doc.sample('startup_time').value:.0f} s" if doc.status.value == "ok" else "-"))
    if doc.status.value == "ok":
        summary += (f"; capacity {doc.sample('capacity').value:g} requests/s ({doc.labels.get('capacity_bound')}, "
                    f"tried {doc.labels.get('capacity_tried')})")
    print(summary)
    print("\n".join(rows))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows, "document": doc.model_dump(mode="json")}))
    return 0 if doc.status.value == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
