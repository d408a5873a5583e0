"""The planner for the fathom and transformer suites: their cells, images, timeouts and digests."""

from __future__ import annotations

from collections import Counter

import pytest

from dlbench.errors import ConfigError
from dlbench.execution.image import frameworks_needed
from dlbench.pipeline import steps
from dlbench.pipeline.scenarios import background_work
from dlbench.request import BenchmarkRequest, plan_jobs
from dlbench.suites import Suite
from dlbench.workloads.profiles import (
    FathomModel,
    Framework,
    get_profile,
    job_timeout,
    load_profiles,
    parse_profiles_text,
    profile_digest,
)


def _request(**fields) -> BenchmarkRequest:
    return BenchmarkRequest.model_validate({"profile": "smoke", **fields})


def test_fathom_plans_each_workload_in_each_task_single_only():
    request = _request(suites=["fathom"], scenarios=["single"], platforms=["bare_metal"], repetitions=1,
                       data=["synthetic"])
    jobs = plan_jobs(request, "r1")
    assert Counter((j.args["model"], j.args["task"]) for j in jobs) == Counter(
        {(m.value, t): 1 for m in FathomModel for t in ("train", "infer")})
    assert {j.command for j in jobs} == {"fathom"} and {j.args["data"] for j in jobs} == {"synthetic"}
    # real data asked for: each workload reads its data set when the directory has it (MNIST, bAbI)
    real = plan_jobs(_request(suites=["fathom"], data=["real"], platforms=["bare_metal"], repetitions=1), "r2")
    assert {j.args["data"] for j in real} == {"auto"}
    argv = real[0].workload_argv("/out.json", "/data")
    assert argv[:1] == ["fathom"] and argv[-2:] == ["--data-dir", "/data"]


def test_fathom_workloads_and_tasks_come_from_the_profile():
    (profile,) = parse_profiles_text("two: {extends: smoke, fathom: {models: [vgg, deepq], tasks: [infer]}}",
                                     load_profiles(), "test").values()
    assert [(m.value, [t.value for t in profile.fathom.tasks]) for m in profile.fathom.models] == [
        ("vgg", ["infer"]), ("deepq", ["infer"])]


def test_transformer_cells_per_scenario_name_pytorch():
    request = _request(suites=["transformer"], scenarios=["single", "distributed", "shared"],
                       platforms=["bare_metal"], repetitions=1)
    jobs = plan_jobs(request, "r1")
    cells = sorted((j.scenario.value, tuple(sorted(j.args.items()))) for j in jobs)
    assert cells == [
        ("distributed", (("framework", "pytorch"), ("mode", "ddp"), ("task", "train"))),
        ("shared", (("framework", "pytorch"), ("interference", "background"), ("task", "train"))),
        ("single", (("framework", "pytorch"), ("task", "generate"))),
        ("single", (("framework", "pytorch"), ("task", "train"))),
    ]
    # the shared cell's neighbour generates with the same model, in the same framework's image
    shared = next(j for j in jobs if j.scenario.value == "shared")
    assert background_work(shared, dict(shared.args)) == {"task": "generate", "framework": "pytorch"}
    assert frameworks_needed(request.frameworks, request.suites) == [Framework.PYTORCH]
    assert frameworks_needed([Framework.JAX], [Suite.FATHOM, Suite.TRANSFORMER, Suite.TF_CNN]) == [
        Framework.TENSORFLOW, Framework.PYTORCH, Framework.JAX]


def test_scenarios_need_a_suite_that_has_them():
    with pytest.raises(ConfigError, match="scenarios of the tf_cnn, transformer and serving suites"):
        steps.validate({"profile": "smoke", "suites": ["fathom"], "scenarios": ["distributed"]})
    steps.validate({"profile": "smoke", "suites": ["fathom", "transformer"], "scenarios": ["single", "shared"]})


def test_timeouts_follow_the_planned_work():
    paper = get_profile("paper")
    seconds, basis = job_timeout(paper, "transformer", {"task": "train"})
    assert seconds > 3600 and "tokens" in basis and f"{paper.transformer.training_flops_per_token:.3g}" in basis
    shared, _ = job_timeout(paper, "transformer", {"task": "train"}, "shared")
    assert shared > seconds
    vgg, basis = job_timeout(paper, "fathom", {"model": "vgg", "task": "train"})
    infer, _ = job_timeout(paper, "fathom", {"model": "vgg", "task": "infer"})
    assert vgg > infer >= 3600 and "fathom vgg train" in basis
    assert job_timeout(get_profile("smoke"), "fathom", {"model": "vgg", "task": "train"})[0] == 3600  # the floor


def test_the_architecture_arithmetic_of_gpt2_small():
    spec = get_profile("paper").transformer
    assert (spec.layers, spec.heads, spec.width, spec.context, spec.vocabulary) == (12, 12, 768, 1024, 50257)
    assert spec.parameters == 124_439_808  # GPT-2 small, LM head tied to the token embedding
    non_embedding = spec.parameters - spec.context * spec.width
    assert spec.training_flops_per_token == 6 * non_embedding + 12 * 12 * 768 * 1024


def test_a_later_suite_section_changes_only_its_own_suites_digest():
    smoke = get_profile("smoke")
    assert profile_digest(smoke) == "4b3a5cae518194af"  # recorded before fathom and transformer existed
    (changed,) = parse_profiles_text("smoke2: {extends: smoke, fathom: {measured_steps: 7}}", load_profiles(),
                                     "test").values()
    assert profile_digest(changed, "tf_cnn") == profile_digest(smoke, "tf_cnn")
    assert profile_digest(changed, "transformer") == profile_digest(smoke, "transformer")
    assert profile_digest(changed, "fathom") != profile_digest(smoke, "fathom")
    assert profile_digest(changed, whole=True) != profile_digest(smoke, whole=True)
    job = next(j for j in plan_jobs(_request(suites=["fathom", "cpu"], platforms=["bare_metal"]), "r")
               if j.suite == "fathom")
    assert job.profile_digest == profile_digest(smoke, "fathom")
