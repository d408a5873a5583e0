"""Profiles are data: the paper profile must be Table 1 of the core study, exactly."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from dlbench.workloads.profiles import PROFILES_FILE, Profile, get_profile


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
