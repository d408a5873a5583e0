"""The one config model: bad input fails before anything is provisioned, naming field and choices."""

from __future__ import annotations

import pytest

from dlbench.config import ConfigError, parse_request, plan_jobs


def test_defaults_are_the_embedded_matrix():
    request = parse_request({})
    assert [p.value for p in request.platforms] == ["bare_metal", "container_on_bare_metal"]
    assert request.effective_repetitions == 2  # smoke profile default
    jobs = plan_jobs(request, "r1")
    assert len(jobs) == 2 * 2 * 3 * 2  # repetitions x platforms x models x data kinds
    assert len({j.job_id for j in jobs}) == len(jobs)
    assert plan_jobs(request, "r1")[5].job_id == jobs[5].job_id  # deterministic: retries overwrite
    assert [j.repetition for j in jobs[:12]] == [0] * 12  # a full first pass before repeating


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
    request = parse_request({"models": ["alexnet"], "platforms": ["bare_metal"], "repetitions": 1})
    synthetic, real = plan_jobs(request, "r")
    assert "--data-dir" not in synthetic.workload_argv("/o", "/d")
    argv = real.workload_argv("/o", "/d")
    assert argv[argv.index("--data-dir") + 1] == "/d" and argv[argv.index("--data") + 1] == "real"
