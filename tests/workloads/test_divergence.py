"""A run whose loss diverges is still a timing run: status ok, timings kept, divergence recorded.

tf_cnn_benchmarks' AlexNet at batch 512 and learning rate 0.005 diverges (issue 11, item 7); the
study still reports its images/s. The end-to-end test forces divergence cheaply: AlexNet at the
smoke profile's toy shapes, batch 2, with a learning rate of 1e30 (the first update makes the
weights overflow float32), three steps, through the real CLI.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

from dlbench.workloads.result import ResultDocument, Status
from dlbench.workloads.training.measure import EXPLODING_FACTOR, loss_trajectory


def test_finite_loss_near_chance_is_not_diverged():
    losses = [2.3, 2.31, 2.29, 2.2, 2.25]
    trajectory = loss_trajectory(losses, num_classes=10)
    assert not trajectory.diverged and trajectory.reason == ""
    assert trajectory.points[0] == (0, 2.3) and trajectory.points[-1] == (4, 2.25)


def test_nan_and_inf_are_diverged_and_the_first_bad_step_is_kept():
    nan = loss_trajectory([2.3, 50.0, float("nan"), float("nan")], num_classes=10)
    assert nan.diverged and nan.reason == "nan" and nan.first_nonfinite_step == 2
    inf = loss_trajectory([2.3, float("inf"), float("nan")], num_classes=10)
    assert inf.reason == "inf" and inf.first_nonfinite_step == 1


def test_exploding_finite_loss_is_diverged():
    limit = EXPLODING_FACTOR * math.log(1001)
    assert loss_trajectory([6.9, 2 * limit], num_classes=1001).reason == "exploding"
    assert not loss_trajectory([6.9, 0.5 * limit], num_classes=1001).diverged


def test_trajectory_samples_first_every_nth_and_last():
    trajectory = loss_trajectory([1.0] * 111, num_classes=10, points=10)
    steps = [step for step, _ in trajectory.points]
    assert steps[0] == 0 and steps[-1] == 110 and steps[1] == 11 and len(steps) == 11


def test_diverging_run_keeps_status_ok_with_timings(tmp_path):
    from dlbench.workloads.profiles import get_profile

    profile = get_profile("smoke").model_dump(mode="json")
    profile["name"] = "diverge"
    profile["tf_cnn"]["alexnet"]["learning_rate"] = 1e30
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "dlbench.workloads", "tf-cnn", "--model", "alexnet", "--profile", "diverge",
         "--profile-spec", json.dumps(profile), "--batch-size", "2", "--warmup-steps", "1", "--measured-steps", "2",
         "--platform", "bare_metal", "--run-id", "t", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = ResultDocument.read(out)
    assert doc.status is Status.OK
    assert doc.sample("throughput").value > 0
    assert doc.labels["diverged"] == "true" and doc.labels["divergence"] in ("nan", "inf", "exploding")
    losses = [s for s in doc.samples if s.metric == "loss"]
    assert losses and losses[0].labels["step"] == 0 and math.isfinite(losses[0].value)
