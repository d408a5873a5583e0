"""Scenarios as a dimension of the request: planned cells, identity, and refusals before provisioning."""

from __future__ import annotations

import pytest

from dlbench.errors import ConfigError
from dlbench.request import parse_request, plan_jobs
from dlbench.workloads.profiles import Scenario, get_profile


def _request(**extra):
    return parse_request({"models": ["alexnet", "resnet50"], "data": ["synthetic"], "repetitions": 1,
                          "suites": ["tf_cnn", "cpu"], "platforms": ["bare_metal"], **extra})


def test_single_is_the_default_and_keeps_its_job_ids():
    request = _request()
    assert request.scenarios == [Scenario.SINGLE]
    jobs = plan_jobs(request, "r")
    assert {j.scenario for j in jobs} == {Scenario.SINGLE}
    # ids of single cells do not depend on the new dimension (re-runs of old requests overwrite)
    import hashlib

    cell = next(j for j in jobs if j.args == {"model": "alexnet", "data": "synthetic"})
    key = "|".join(["r", "bare_metal", "tf_cnn", repr(sorted(cell.args.items())), "0"])
    assert cell.job_id == hashlib.sha256(key.encode()).hexdigest()[:24]


def test_every_scenario_plans_its_cells_and_micro_suites_run_once():
    request = _request(scenarios=["single", "distributed", "shared"])
    jobs = plan_jobs(request, "r")
    by = {s: [j for j in jobs if j.scenario is s] for s in Scenario}
    assert len([j for j in by[Scenario.SINGLE] if j.suite == "cpu"]) == 1
    assert all(j.suite == "tf_cnn" for j in by[Scenario.DISTRIBUTED] + by[Scenario.SHARED])
    assert sorted(j.args["model"] for j in by[Scenario.DISTRIBUTED]) == ["alexnet", "resnet50"]
    assert {j.args["mode"] for j in by[Scenario.DISTRIBUTED]} == {"distributed_replicated"}
    shared = get_profile("smoke").scenarios.shared
    background = [j for j in by[Scenario.SHARED] if j.args["interference"] == "background"]
    control = [j for j in background if "batch_size" in j.args]
    assert [(j.args["model"], j.args["batch_size"]) for j in control] == [
        (shared.control_model.value, shared.control_batch_size)]
    tenants = [j for j in by[Scenario.SHARED] if j.args["interference"] == "tenants"]
    assert sorted({j.args["tenants"] for j in tenants}) == sorted(shared.tenants)
    assert len({j.job_id for j in jobs}) == len(jobs), "every cell has its own id"
    # the same model/data in two scenarios are two cells with distinct ids and labels
    single = next(j for j in by[Scenario.SINGLE] if j.args.get("model") == "alexnet")
    dist = next(j for j in by[Scenario.DISTRIBUTED] if j.args["model"] == "alexnet")
    assert single.job_id != dist.job_id and "distributed" in dist.label and "distributed" not in single.label


def test_the_request_may_choose_the_modern_mode():
    jobs = plan_jobs(_request(scenarios=["distributed"], distributed_mode="multi_worker_mirrored"), "r")
    assert {j.args["mode"] for j in jobs if j.scenario is Scenario.DISTRIBUTED} == {"multi_worker_mirrored"}


def test_paper_profile_is_the_study():
    spec = get_profile("paper").scenarios
    assert spec.distributed.roles() == [("ps", 0), ("worker", 0), ("worker", 1)]
    assert spec.distributed.mode.value == "distributed_replicated"
    assert (spec.shared.background_model.value, spec.shared.background_batch_size) == ("alexnet", 512)
    assert spec.shared.control_batch_size == 32 and spec.shared.tenants == [2, 4]
    assert spec.distributed.roles(spec.distributed.mode.MULTI_WORKER_MIRRORED) == [("worker", 0), ("worker", 1)]


@pytest.mark.parametrize(("params", "message"), [
    ({"scenarios": ["sideways"]}, "scenarios.0: Input should be 'single', 'distributed' or 'shared'"),
    ({"distributed_mode": "async"}, "distributed_mode: Input should be"),
    ({"scenarios": ["distributed"], "suites": ["cpu"]},
     "scenarios of the tf_cnn, transformer and serving suites; add one to suites"),
    ({"scenarios": ["distributed"], "provider": "ironic", "ironic": {"cloud": "x"}},
     "scenarios: 'distributed' runs 3 roles on 3 different instances of bare_metal, but provider 'ironic' "
     "provisions 1 (set ironic.nodes.bare_metal to 3 or more)"),
    ({"scenarios": ["distributed"], "provider": "ironic", "distributed_mode": "multi_worker_mirrored",
      "ironic": {"cloud": "x", "nodes": {"bare_metal": 1}}}, "runs 2 roles on 2 different instances"),
])
def test_bad_scenarios_are_refused_naming_the_field(params, message):
    with pytest.raises(ConfigError) as err:
        parse_request({"platforms": ["bare_metal"], **params})
    assert message in str(err.value)


def test_enough_instances_pass_and_shared_nodes_count_for_containers():
    request = parse_request({"provider": "ironic", "scenarios": ["distributed"],
                             "platforms": ["bare_metal", "container_on_bare_metal"],
                             "ironic": {"cloud": "x", "nodes": {"bare_metal": 3}, "share_nodes": True}})
    assert request.provider.instances_for(request.platforms[1]) == 3
    # the embedded provider is one host by design: roles are processes/containers on it
    assert parse_request({"scenarios": ["distributed"]}).provider.instances_for(request.platforms[0]) is None
