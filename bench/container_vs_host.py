"""What does the container cost? The same smoke TF job on the host and in the workload image.

Three sides: the host in its workload environment (``build/workload-env``, what ``make run``
uses), the host in the controller's own interpreter (what it used before issue 39: the gap between
these two is the environment's, not the platform's), and the container. All go through the real
executors the pipeline uses (``LocalProcessExecutor`` for bare
metal, ``DockerExecutor`` for the container), so the numbers include what a benchmark row
includes: interpreter start and TF import, plus container create/start/remove on the Docker side.
Rounds are interleaved and alternate their order (this 2-core machine is noisy: compare side by
side, never against a number measured another day). Prints medians and container/host ratios;
the goal is in-workload throughput ratio ~1.0 (a container adds no compute overhead) and a
launch-to-end overhead of a few seconds at most.

    .venv/bin/python bench/container_vs_host.py --model alexnet --data synthetic --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# metric -> (label printed, higher is better)
METRICS = {
    "launch_to_end_time": ("launch to end (s)", False),
    "elapsed_time": ("in-workload elapsed (s)", False),
    "setup_time": ("model setup (s)", False),
    "throughput": ("throughput (images/s)", True),
    "step_time_mean": ("measured step mean (s)", False),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="alexnet", choices=["inception3", "resnet50", "alexnet"])
    parser.add_argument("--data", default="synthetic", choices=["synthetic", "real"])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the result documents (path printed)")
    args = parser.parse_args()

    from dlbench.execution.image import DEFAULT_TAG, docker_available, ensure_image

    ok, reason = docker_available()
    if not ok:
        print(f"cannot compare: {reason}")
        return 2
    image = ensure_image(DEFAULT_TAG)
    work = Path(tempfile.mkdtemp(prefix="dlbench-bench-ct-"))
    try:
        return compare(args, image, work)
    finally:
        if args.keep:
            print(f"result documents kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def compare(args: argparse.Namespace, image: str, work: Path) -> int:
    """The interleaved rounds and the side-by-side table."""
    from dlbench.execution.docker import DockerExecutor
    from dlbench.execution.local import LocalProcessExecutor
    from dlbench.execution.targets import LocalDocker, LocalProcess, Target
    from dlbench.jobs import Job
    from dlbench.workloads.result import Platform, Status

    data_dir = None
    if args.data == "real":
        from dlbench.workloads.cnn.tf_data import write_imagenet_tfrecords

        data_dir = str(work / "tfrecords")
        write_imagenet_tfrecords(Path(data_dir), images=64, shards=2, image_size=80)

    host = Target(name="host", platform=Platform.BARE_METAL, access=LocalProcess(), data_dir=data_dir)
    sides = {
        # The host's workload environment (what make run uses: execution/workload_env.py) ...
        "host": (LocalProcessExecutor(), Platform.BARE_METAL, host),
        # ... and the controller's own interpreter (Airflow and every framework beside TensorFlow): what
        # bare-metal jobs ran in before issue 39, item 8. The two host sides differ only by the environment.
        "controller": (LocalProcessExecutor(python=sys.executable), Platform.BARE_METAL, host),
        "container": (DockerExecutor(image), Platform.CONTAINER_ON_BARE_METAL,
                      Target(name="docker", platform=Platform.CONTAINER_ON_BARE_METAL,
                             access=LocalDocker(image=image), data_dir=data_dir)),
    }
    values: dict[str, dict[str, list[float]]] = {side: {m: [] for m in METRICS} for side in sides}
    for round_ in range(args.rounds):
        order = list(sides)[round_ % len(sides):] + list(sides)[:round_ % len(sides)]  # each side first in turn
        for side in order:
            executor, platform, target = sides[side]
            job = Job(job_id=f"bench-{side}-{round_}", run_id="bench-ct", platform=platform, suite="tf_cnn",
                      command="tf-cnn", args={"model": args.model, "data": args.data}, profile=args.profile)
            doc = executor.execute(job, target, work / f"{side}-{round_}.json", timeout=900)
            if doc.status is not Status.OK:
                print(f"round {round_ + 1} {side}: FAILED {doc.error}")
                return 1
            for metric in METRICS:
                values[side][metric].append(doc.sample(metric).value)
            print(f"round {round_ + 1} {side:9s} launch-to-end {doc.sample('launch_to_end_time').value:6.2f} s  "
                  f"throughput {doc.sample('throughput').value:8.2f} images/s", flush=True)

    print(f"\n{args.model} / {args.data} data / {args.profile} profile, {args.rounds} interleaved rounds, "
          f"image {image} (medians)")
    print(f"host = the workload environment ({LocalProcessExecutor().env_label}), controller = {sys.executable}")
    print(f"{'metric':26s} {'host':>10s} {'controller':>10s} {'container':>10s} {'c/host':>8s} {'c/ctrl':>8s}")
    for metric, (label, _higher) in METRICS.items():
        h, ctl, container = (statistics.median(values[s][metric]) for s in ("host", "controller", "container"))
        print(f"{label:26s} {h:10.3f} {ctl:10.3f} {container:10.3f} {container / h if h else float('nan'):8.3f} "
              f"{container / ctl if ctl else float('nan'):8.3f}")
    overhead = statistics.median(values["container"]["launch_to_end_time"]) - statistics.median(
        values["host"]["launch_to_end_time"])
    print(f"container launch-to-end overhead: {overhead:+.2f} s per job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
