"""The one config model: bad input fails before anything is provisioned, naming field and choices."""

from __future__ import annotations

import pytest

from dlbench.errors import ConfigError
from dlbench.request import parse_request, plan_jobs


def test_defaults_are_the_embedded_matrix():
    request = parse_request({})
    assert [p.value for p in request.platforms] == ["bare_metal", "container_on_bare_metal"]
    assert request.effective_repetitions == 2  # smoke profile default
    jobs = plan_jobs(request, "r1")
    # repetitions x platforms x (models x data kinds + five micro suites)
    assert len(jobs) == 2 * 2 * (3 * 2 + 5)
    assert len({j.job_id for j in jobs}) == len(jobs)
    assert plan_jobs(request, "r1")[5].job_id == jobs[5].job_id  # deterministic: retries overwrite
    assert [j.repetition for j in jobs[:22]] == [0] * 22  # a full first pass before repeating


def test_platforms_interleave_per_cell_and_rotate_per_repetition():
    """Each cell's platforms run back to back, first one first on even repetitions and last on odd
    ones: drift over the run cannot land on one platform only."""
    request = parse_request({"platforms": ["bare_metal", "container_on_bare_metal", "virtual_machine"],
                             "suites": ["tf_cnn"], "models": ["alexnet"], "data": ["synthetic", "real"],
                             "repetitions": 3})
    jobs = plan_jobs(request, "r")
    by_rep = [[j for j in jobs if j.repetition == r] for r in range(3)]
    for r, rep_jobs in enumerate(by_rep):
        for first in range(0, len(rep_jobs), 3):  # three platforms of one cell, consecutive
            cell = rep_jobs[first:first + 3]
            assert len({(j.args["model"], j.args["data"]) for j in cell}) == 1
            assert [j.platform.value for j in cell] == [
                *["bare_metal", "container_on_bare_metal", "virtual_machine"][r:],
                *["bare_metal", "container_on_bare_metal", "virtual_machine"][:r]]
    # over the three repetitions every platform ran in every position once (a Latin square)
    positions = {(j.platform.value, i % 3) for rep_jobs in by_rep for i, j in enumerate(rep_jobs)}
    assert len(positions) == 9


def test_repetitions_per_suite_follow_the_profile():
    paper = parse_request({"profile": "paper", "platforms": ["bare_metal"], "models": ["alexnet"],
                           "data": ["synthetic"], "suites": ["tf_cnn", "disk"]})
    jobs = plan_jobs(paper, "p")
    assert sum(j.suite == "disk" for j in jobs) == 20  # study 001: every result is the mean of 20 runs
    assert sum(j.suite == "tf_cnn" for j in jobs) == 3
    disk = next(j for j in jobs if j.suite == "disk")
    argv = disk.workload_argv("/o", "/data")
    assert argv[0] == "disk" and argv[argv.index("--data-dir") + 1] == "/data"


@pytest.mark.parametrize(("params", "field", "allowed"), [
    ({"models": ["vgg16"]}, "models.0", "inception3, resnet50, alexnet"),
    ({"platforms": ["mainframe"]}, "platforms.0", "bare_metal, virtual_machine"),
    ({"data": ["imagenet"]}, "data.0", "synthetic, real"),
    ({"profile": "fast"}, "profile", "paper, smoke"),
    ({"provider": "aws"}, "provider", "local"),
])
def test_bad_values_name_the_field_and_the_allowed_values(params, field, allowed):
    with pytest.raises(ConfigError) as info:
        parse_request(params)
    assert field in str(info.value) and allowed in str(info.value)


def test_repetitions_bounds_and_unknown_fields():
    with pytest.raises(ConfigError, match="repetitions"):
        parse_request({"repetitions": 0})
    with pytest.raises(ConfigError, match="colour"):
        parse_request({"colour": "blue"})


def test_argv_passes_real_data_dir_only_for_real_data():
    request = parse_request({"models": ["alexnet"], "platforms": ["bare_metal"], "repetitions": 1,
                             "suites": ["tf_cnn"]})
    synthetic, real = plan_jobs(request, "r")
    assert "--data-dir" not in synthetic.workload_argv("/o", "/d")
    argv = real.workload_argv("/o", "/d")
    assert argv[argv.index("--data-dir") + 1] == "/d" and argv[argv.index("--data") + 1] == "real"


def test_the_equivalence_margin_is_the_request_s_else_the_profile_s_and_is_checked():
    """Issue 39, item 1: the verdicts' margin is declared by the user (request field and form
    Param ``equivalence_margin_pct``, else the profile's, default 3 %), read back by the report
    from the run's archived request, and a bad value is refused before anything runs."""
    from dlbench.reports.analysis.run_data import run_margin

    default = parse_request({})
    assert default.equivalence_margin == pytest.approx(0.03)
    asked = parse_request({"equivalence_margin_pct": 5})
    assert asked.equivalence_margin == pytest.approx(0.05)
    assert run_margin(asked.model_dump(mode="json")) == pytest.approx(0.05)
    assert run_margin(default.model_dump(mode="json")) == pytest.approx(0.03)  # the pinned profile's
    assert run_margin({}) == pytest.approx(0.03)  # documents loaded without a request
    for bad in (0, -1, 60):
        with pytest.raises(ConfigError, match="equivalence_margin_pct"):
            parse_request({"equivalence_margin_pct": bad})
