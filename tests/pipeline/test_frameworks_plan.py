"""The frameworks dimension below the request: cells, job ids, workload arguments, distributed
modes and roles per framework, precision in profiles and documents' identity."""

from __future__ import annotations

import pytest

from dlbench.errors import ConfigError
from dlbench.jobs import job_id_for
from dlbench.request import parse_request, plan_jobs
from dlbench.workloads.cnn.main import parameters_of
from dlbench.workloads.profiles import Framework, Precision, get_profile, profile_digest

BASE = {"suites": ["tf_cnn"], "models": ["resnet50"], "data": ["synthetic"], "platforms": ["bare_metal"],
        "repetitions": 1}


def test_tensorflow_jobs_keep_their_ids_and_arguments():
    """A request without frameworks, or naming only tensorflow, plans exactly what it did before
    frameworks existed: the same job ids (old runs re-run overwrite, never duplicate) and argv."""
    for conf in (BASE, {**BASE, "frameworks": ["tensorflow"]}):
        (job,) = plan_jobs(parse_request(conf), "run1")
        assert job.args == {"model": "resnet50", "data": "synthetic"}
        assert job.job_id == job_id_for("run1", "bare_metal", "tf_cnn", {"model": "resnet50", "data": "synthetic"}, 0)
        assert "--framework" not in job.workload_argv("/tmp/x.json")


def test_each_framework_is_a_cell_of_its_own():
    request = parse_request({**BASE, "frameworks": ["tensorflow", "pytorch", "jax", "pytorch"]})
    assert request.frameworks == [Framework.TENSORFLOW, Framework.PYTORCH, Framework.JAX]  # duplicates dropped
    jobs = plan_jobs(request, "run1")
    assert [j.args.get("framework") for j in jobs] == [None, "pytorch", "jax"]
    assert len({j.job_id for j in jobs}) == 3
    argv = jobs[1].workload_argv("/tmp/x.json")
    assert argv[argv.index("--framework") + 1] == "pytorch"
    assert jobs[1].label == "bare_metal/tf_cnn/resnet50/pytorch/synthetic/r0"


def test_distributed_mode_per_framework_and_its_roles():
    request = parse_request({**BASE, "frameworks": ["tensorflow", "pytorch", "jax"], "scenarios": ["distributed"],
                             "distributed_mode": "multi_worker_mirrored"})
    modes = {j.args.get("framework", "tensorflow"): j.args["mode"] for j in plan_jobs(request, "run1")}
    assert modes == {"tensorflow": "multi_worker_mirrored", "pytorch": "ddp", "jax": "jax_distributed"}
    spec = request.resolved_profile.scenarios.distributed
    assert [r for r, _ in spec.roles(Framework.PYTORCH.distributed_modes[0])] == ["worker", "worker"]
    assert [r for r, _ in spec.roles(Framework.TENSORFLOW.distributed_modes[0])] == ["ps", "worker", "worker"]


def test_a_framework_mode_is_not_tensorflows_choice():
    with pytest.raises(ConfigError) as err:
        parse_request({**BASE, "distributed_mode": "ddp"})
    assert "distributed_mode: ddp is chosen by its framework itself" in str(err.value)
    assert "(allowed: distributed_replicated, multi_worker_mirrored)" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_request({**BASE, "frameworks": ["mxnet"]})
    assert "frameworks.0: " in str(err.value) and "(allowed: tensorflow, pytorch, jax)" in str(err.value)


def test_pytorch_alone_needs_only_the_workers_instances():
    """DDP has no parameter server: 2 instances are enough where TensorFlow's study mode needs 3."""
    ironic = {"nodes": {"bare_metal": 2}, "image_source": "file:///x.tar", "cloud": "devcloud"}
    conf = {**BASE, "provider": "ironic", "scenarios": ["distributed"], "ironic": ironic}
    parse_request({**conf, "frameworks": ["pytorch"]})
    with pytest.raises(ConfigError) as err:
        parse_request({**conf, "frameworks": ["pytorch", "tensorflow"]})
    assert "runs 3 roles on 3 different instances" in str(err.value)


def test_precision_is_part_of_the_case_only_when_not_the_studys():
    smoke = get_profile("smoke")
    spec = smoke.training("resnet50")
    assert spec.precision is Precision.FP32 and "precision" not in parameters_of(spec)
    assert parameters_of(spec.model_copy(update={"precision": Precision.BF16}))["precision"] == "bf16"
    # the digest of a profile written before precision existed is unchanged; bf16 is another profile
    bf16 = smoke.model_copy(update={"tf_cnn": {m: s.model_copy(update={"precision": Precision.BF16})
                                               for m, s in smoke.tf_cnn.items()}})
    assert profile_digest(smoke) == "4b3a5cae518194af"  # recorded before the field existed
    assert profile_digest(bf16) != profile_digest(smoke)
