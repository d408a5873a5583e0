"""Profiles are data: the paper profile must be Table 1 of the core study, exactly."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from dlbench.profiles import get_profile
from dlbench.workloads.profiles import PROFILES_FILE, Profile


def test_paper_profile_is_table_1_of_the_core_study():
    paper = get_profile("paper")
    expected = {"inception3": (32, 299), "resnet50": (32, 224), "alexnet": (512, 227)}
    for model, (batch, size) in expected.items():
        spec = paper.training(model)
        assert (spec.batch_size_per_device, spec.image_size) == (batch, size)
        assert (spec.warmup_steps, spec.measured_steps) == (10, 100)
        assert (spec.data_format, spec.optimizer) == ("NHWC", "sgd")
        assert (spec.variable_update, spec.local_parameter_device) == ("parameter_server", "cpu")


def test_unknown_profile_names_the_allowed_ones():
    with pytest.raises(ValueError, match="allowed: paper, smoke"):
        get_profile("fast")


def test_a_typo_in_a_profile_fails_with_the_field_name():
    raw = yaml.safe_load(PROFILES_FILE.read_text())["smoke"]
    raw["tf_cnn"]["alexnet"]["batch_sise_per_device"] = 8
    with pytest.raises(ValidationError, match="batch_sise_per_device"):
        Profile.model_validate({"name": "broken", **raw})


def test_builtins_travel_by_name_and_user_profiles_are_listed(tmp_path, monkeypatch, capsys):
    """A built-in needs nothing on the command line; the CLI lists the user's file beside it."""
    import json

    from dlbench.workloads import cli
    from dlbench.workloads.profiles import PROFILES_FILE_ENV, is_builtin, profile_digest

    assert is_builtin(get_profile("paper")) and profile_digest(get_profile("paper")) != profile_digest(
        get_profile("smoke"))
    path = tmp_path / "mine.yaml"
    path.write_text("mine: {extends: smoke, repetitions: 1}\n")
    monkeypatch.setenv(PROFILES_FILE_ENV, str(path))
    assert cli.main(["profiles"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["mine"]["repetitions"] == 1 and listed["mine"]["micro"] == listed["smoke"]["micro"]
    assert not is_builtin(get_profile("mine"))
