"""Micro-benchmark parameters in the profiles: the studies' values in ``paper``, per-suite repetitions."""

from __future__ import annotations

import pydantic
import pytest
import yaml

from dlbench.workloads.profiles import PROFILES_FILE, get_profile, load_profiles


def test_paper_profile_uses_the_studies_parameters():
    micro = get_profile("paper").micro
    assert micro.repetitions == 20
    assert micro.cpu.hpl_sizes[0] == 2000 and micro.cpu.hpl_sizes[-1] == 45000 and len(micro.cpu.hpl_sizes) == 14
    assert (micro.cpu.hpcg_dimension, micro.cpu.hpcg_seconds) == (192, 1800)
    assert micro.disk.dd_block == "64k" and micro.disk.dd_counts == [16, 1600, 8192, 16384]
    assert (micro.disk.ioping_count, micro.disk.ioping_seconds) == (10, 5)
    assert micro.gpu.conv_size == 18432 and micro.gpu.gemm == (23040, 17280, 11520)
    assert micro.gpu.histogram_values == 67_108_864


def _with_micro(tmp_path, **micro_fields):
    raw = yaml.safe_load(PROFILES_FILE.read_text())
    raw["paper"]["micro"].update(micro_fields)
    path = tmp_path / "profiles.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_profiles(path)["paper"]


def test_a_suite_can_have_its_own_repetitions(tmp_path):
    profile = _with_micro(tmp_path, suite_repetitions={"cpu": 3})
    assert profile.repetitions_for("cpu") == 3
    assert profile.repetitions_for("disk") == 20
    assert profile.repetitions_for("tf_cnn") == profile.repetitions


@pytest.mark.parametrize("bad", [{"hpl": 3}, {"cpu": 0}])
def test_bad_suite_repetitions_are_refused_naming_the_field(tmp_path, bad):
    with pytest.raises(pydantic.ValidationError, match="suite_repetitions"):
        _with_micro(tmp_path, suite_repetitions=bad)
