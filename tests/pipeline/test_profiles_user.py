"""User-defined profiles (file or Airflow Variable), pinned in the request, shipped to the workload,
recorded in its document; timeouts derived from a profile's planned work."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from dlbench.errors import ConfigError
from dlbench.jobs import Job
from dlbench.pipeline import steps
from dlbench.profiles import get_profile
from dlbench.request import parse_request
from dlbench.workloads import cli
from dlbench.workloads.profiles import (
    MIN_JOB_TIMEOUT_S,
    PROFILES_FILE_ENV,
    ProfileError,
    job_timeout,
    profile_digest,
    register_user_profiles,
)
from dlbench.workloads.result import ResultDocument, Status

# "paper on 8 GPUs with batch 64": paper's fields, batch 64 for every model. The test shrinks the
# image and the steps so the one training job runs in seconds on 2 CPU cores.
PAPER64 = """
paper64:
  extends: paper
  description: paper with batch 64 per GPU (shrunk to seconds for the test)
  repetitions: 1
  tf_cnn:
    defaults: {batch_size_per_device: 64, warmup_steps: 1, measured_steps: 2, num_classes: 10}
    alexnet: {image_size: 67}
"""


@pytest.fixture(autouse=True)
def _forget_registered_profiles():
    """Profiles registered by a test (a validated request, the Variable) stay in its process only."""
    from dlbench.workloads.profiles import catalog as profiles

    before = dict(profiles._registered)
    yield
    profiles._registered.clear()
    profiles._registered.update(before)


@pytest.fixture
def profiles_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "profiles.yaml"
    path.write_text(PAPER64)
    monkeypatch.setenv(PROFILES_FILE_ENV, str(path))
    return path


def test_a_user_profile_extends_paper_and_overrides_a_few_fields(profiles_file: Path):
    mine, paper = get_profile("paper64"), get_profile("paper")
    assert {m.value: s.batch_size_per_device for m, s in mine.tf_cnn.items()} == {
        "inception3": 64, "resnet50": 64, "alexnet": 64}
    assert mine.training("alexnet").image_size == 67 and mine.training("resnet50").image_size == 224
    assert mine.training("alexnet").learning_rate == paper.training("alexnet").learning_rate  # inherited
    assert mine.micro == paper.micro and mine.scenarios == paper.scenarios
    assert mine.repetitions == 1
    assert profile_digest(mine) != profile_digest(paper)


def test_user_profile_file_reaches_the_jobs_argv_and_document(profiles_file: Path, monkeypatch, caplog):
    request = steps.validate({"profile": "paper64", "platforms": ["bare_metal"], "suites": ["tf_cnn"],
                              "models": ["alexnet"], "data": ["synthetic"]})
    spec = request["profile_spec"]
    assert request["profile"] == "paper64" and spec["tf_cnn"]["alexnet"]["batch_size_per_device"] == 64
    jobs = steps.plan(request, "manual__user-profile")
    assert len(jobs) == 1  # the profile's repetitions: 1
    digest = profile_digest(get_profile("paper64"))
    assert jobs[0]["profile_digest"] == digest and jobs[0]["timeout_s"] >= MIN_JOB_TIMEOUT_S
    argv = Job.model_validate(jobs[0]).workload_argv("/o")
    shipped = json.loads(argv[argv.index("--profile-spec") + 1])
    assert argv[argv.index("--profile") + 1] == "paper64"
    assert shipped["tf_cnn"]["alexnet"]["batch_size_per_device"] == 64

    # Later tasks run on other workers without the file: the request carries the pinned profile,
    # the workload gets it on its command line.
    monkeypatch.delenv(PROFILES_FILE_ENV)
    tags = steps.tags_for("manual__user-profile", "dlbench_benchmark")
    targets = steps.provision(request, tags)
    try:
        with caplog.at_level(logging.INFO, logger="dlbench.pipeline.steps"):
            summary = steps.run_job(jobs[0], targets, request=request)
    finally:
        steps.release(request, tags, targets)
    assert any("timeout" in r.getMessage() and "profile paper64" in r.getMessage() for r in caplog.records)
    doc = ResultDocument.read(summary["archive"])
    assert doc.status is Status.OK, doc.error
    assert doc.benchmark.parameters["profile"] == "paper64"
    assert doc.benchmark.parameters["batch_size_per_device"] == 64
    assert doc.labels["profile"] == "paper64" and doc.labels["profile_digest"] == digest


def test_profiles_from_the_variable_json_are_validated_and_selectable():
    variable = json.dumps({"paper-var": {"extends": "paper", "micro": {"cpu": {"hpl_sizes": [1000]}}}})
    request = steps.validate({"profile": "paper-var", "platforms": ["bare_metal"], "suites": ["cpu"],
                              "repetitions": 1}, user_profiles=variable)
    assert request["profile_spec"]["micro"]["cpu"]["hpl_sizes"] == [1000]
    assert request["profile_spec"]["micro"]["cpu"]["hpcg_seconds"] == 1800  # the rest is paper's


@pytest.mark.parametrize(("text", "field"), [
    ("bad: {extends: paper, tf_cnn: {alexnet: {batch_size_per_device: 0}}}",
     "profiles.bad.tf_cnn.alexnet.batch_size_per_device: Input should be greater than 0"),
    ("bad: {extends: paper, micro: {cpu: {hpl_sise: [1000]}}}", "profiles.bad.micro.cpu.hpl_sise: Extra inputs"),
    ("bad: {extends: papr}", "profiles.bad.extends: unknown profile 'papr' (allowed: paper, smoke"),
    ("bad: {description: no fields}", "profiles.bad.repetitions: Field required"),
    ("a: {extends: b}\nb: {extends: a}", "profiles.b.extends: cycle a -> b -> a"),
])
def test_a_bad_user_profile_is_refused_naming_the_field(text: str, field: str):
    with pytest.raises(ConfigError) as info:
        steps.validate({"profile": "smoke"}, user_profiles=text)
    assert field in str(info.value) and "dlbench_profiles" in str(info.value)


def test_a_bad_profile_file_names_the_file_and_the_field(tmp_path, monkeypatch):
    path = tmp_path / "p.yaml"
    path.write_text("mine: {extends: smoke, micro: {disk: {fio_runtime_s: -1}}}")
    monkeypatch.setenv(PROFILES_FILE_ENV, str(path))
    with pytest.raises(ProfileError, match=r"p.yaml:\n  profiles.mine.micro.disk.fio_runtime_s: Input should be"):
        get_profile("mine")


def test_an_unknown_profile_lists_the_allowed_names_with_the_users():
    register_user_profiles("listed: {extends: smoke}", source="test")
    with pytest.raises(ConfigError, match=r"profile: unknown profile 'nope' \(allowed: paper, smoke, .*listed"):
        parse_request({"profile": "nope"})


def test_a_redefined_profile_is_told_apart_by_its_digest():
    builtin = parse_request({"profile": "smoke", "platforms": ["bare_metal"], "suites": ["disk"]})
    job = steps.plan(builtin.model_dump(mode="json"), "digest")[0]
    assert "--profile-spec" not in Job.model_validate(job).workload_argv("/o")  # the machine has it
    register_user_profiles("smoke: {extends: smoke, micro: {disk: {fio_runtime_s: 2}}}", source="test")
    changed = parse_request({"profile": "smoke", "platforms": ["bare_metal"], "suites": ["disk"]})
    assert profile_digest(changed.resolved_profile) != job["profile_digest"]
    with pytest.raises(ValueError, match="planned with"):  # a job never runs another definition
        Job.model_validate(job).workload_argv("/o")


def test_derived_timeouts_follow_the_planned_work():
    paper, smoke = get_profile("paper"), get_profile("smoke")
    cpu, basis = job_timeout(paper, "cpu")
    assert cpu > 1800 + paper.micro.cpu.hpcg_seconds and "HPL 14 sizes" in basis and "HPCG 1800 s" in basis
    assert job_timeout(smoke, "cpu")[0] == MIN_JOB_TIMEOUT_S  # toy sizes keep the old floor
    alexnet, _ = job_timeout(paper, "tf_cnn", {"model": "alexnet"})
    assert alexnet > job_timeout(paper, "tf_cnn", {"model": "resnet50"})[0] > MIN_JOB_TIMEOUT_S
    shared = job_timeout(paper, "tf_cnn", {"model": "alexnet", "interference": "tenants", "tenants": 4}, "shared")[0]
    assert shared > alexnet
    request = parse_request({"profile": "paper", "platforms": ["bare_metal"], "suites": ["cpu"]})
    job = steps.plan(request.model_dump(mode="json"), "t")[0]
    assert job["timeout_s"] == cpu
    assert steps.job_timeout_for(Job.model_validate(job), max_timeout=7200) == 7200  # the task's ceiling wins


def test_the_workload_refuses_a_spec_for_another_name(capsys):
    spec = json.dumps({**get_profile("smoke").model_dump(mode="json"), "name": "other"})
    with pytest.raises(SystemExit) as info:
        cli.main(["disk", "--out", "/tmp/x.json", "--profile", "smoke", "--profile-spec", spec])
    assert info.value.code == 2 and "describes profile 'other'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["disk", "--out", "/tmp/x.json", "--profile", "nope"])
    assert "allowed: paper, smoke" in capsys.readouterr().err


def test_the_form_accepts_any_profile_name_and_suggests_the_builtins():
    pytest.importorskip("airflow")
    from dlbench.dags import benchmark

    form = benchmark.params()
    schema = form["profile"].schema
    assert "enum" not in schema and {"auto", "paper", "smoke"} <= set(schema["examples"])
    form["profile"].resolve("my-own-profile")  # validated at validate_request, not by the form


def test_a_user_profiles_distributed_port_is_asked_of_the_cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A user profile may move the distributed scenario's port anywhere: the run's demand names it,
    so a cloud that firewalls its machines (Nova's security group) opens it for the run; the
    built-in set does not contain it."""
    from dlbench.providers.machines import plan_demands
    from dlbench.providers.nova import benchmark_ports

    path = tmp_path / "profiles.yaml"
    path.write_text("myport:\n  extends: smoke\n  scenarios:\n    distributed: {port: 29517}\n")
    monkeypatch.setenv(PROFILES_FILE_ENV, str(path))
    request = parse_request({"provider": "nova", "platforms": ["virtual_machine"], "profile": "myport",
                             "scenarios": ["single", "distributed"], "suites": ["tf_cnn"],
                             "nova": {"cloud": "c", "nodes": {"virtual_machine": 3}}})
    (demand,) = plan_demands(request, request.provider)
    assert demand.ports == (("tcp", 29517, 29517),)
    assert not any(low <= 29517 <= high for proto, low, high in benchmark_ports() if proto == "tcp")
    single = parse_request({"provider": "nova", "platforms": ["virtual_machine"], "profile": "myport",
                            "nova": {"cloud": "c"}})
    assert plan_demands(single, single.provider)[0].ports == ()  # no distributed scenario: no port
