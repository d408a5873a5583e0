"""Gates in the request: refused before anything is provisioned naming ``gates[i].<field>``; the
Variable ``dlbench_gates`` applies only when the request has none; the gates step writes
gates.json beside the report and says why a gate failed (docs/gates.md)."""

from __future__ import annotations

import json

import pytest

from dlbench import storage
from dlbench.errors import ConfigError
from dlbench.pipeline import gates
from dlbench.request import parse_request
from dlbench.warehouse import db
from dlbench.warehouse.load import load_documents
from tests.reports.demo_run import PLATFORMS, RUN, documents, run_info

OK = {"platform": "container_on_bare_metal", "metric": "throughput", "ratio": 0.9}


@pytest.mark.parametrize(("gate", "words"), [
    ({**OK, "platform": "vm"}, "gates[1].platform: Input should be 'bare_metal', 'virtual_machine', "),
    ({**OK, "platform": "bare_metal"}, "gates[1].platform: bare_metal is the baseline"),
    ({**OK, "platform": "virtual_machine"}, "gates[1].platform: 'virtual_machine' is not measured by this run (its "
                                            "platforms: bare_metal, container_on_bare_metal)"),
    ({**OK, "suite": "dltools"}, "gates[1].suite: 'dltools' is not measured by this run (its suites: "),
    ({**OK, "scenario": "shared"}, "gates[1].scenario: 'shared' is not measured by this run (its scenarios: single)"),
    ({**OK, "op": ">"}, "gates[1].op: Input should be '>=' or '<=' (allowed: >=, <=)"),
    ({**OK, "ratio": 0}, "gates[1].ratio: Input should be greater than 0"),
    ({**OK, "confidence": 95}, "gates[1].confidence: Input should be less than 1"),
    ({k: v for k, v in OK.items() if k != "metric"}, "gates[1].metric: Field required"),
    ({**OK, "treshold": 0.9}, "gates[1].treshold: Extra inputs are not permitted"),
    ("throughput >= 0.9", "gates[1]: Input should be a valid dictionary"),
])
def test_a_bad_gate_is_refused_naming_its_field(gate, words):
    with pytest.raises(ConfigError) as exc:
        parse_request({"gates": [OK, gate]})
    assert words in str(exc.value), str(exc.value)
    assert "gates[0]" not in str(exc.value)  # the good gate is not blamed


def test_a_gate_needs_bare_metal_in_the_run():
    with pytest.raises(ConfigError, match=r"gates\[0\]: a gate compares with bare metal, but platforms does not "):
        parse_request({"platforms": ["container_on_bare_metal"], "gates": [OK]})


def test_a_valid_gate_is_pinned_in_the_validated_request():
    request = parse_request({"gates": [{**OK, "op": ">=", "benchmark": "alexnet", "data": "synthetic"}]})
    [gate] = request.model_dump(mode="json")["gates"]
    assert gate == {"name": None, "platform": "container_on_bare_metal", "metric": "throughput", "op": ">=",
                    "ratio": 0.9, "confidence": 0.95, "suite": None, "benchmark": "alexnet", "scenario": None,
                    "data": "synthetic"}


def test_the_request_s_gates_win_over_the_variable():
    variable = json.dumps([{**OK, "ratio": 0.5}])
    mine = {"profile": "smoke", "gates": [OK]}
    assert gates.with_variable_gates(mine, variable) == (mine, False)
    # [] is a declaration too: this run has no gates, whatever the deployment's standing ones.
    assert gates.with_variable_gates({"gates": []}, variable) == ({"gates": []}, False)
    for unset in ({}, {"gates": None}):  # the form's empty field, a request without the key
        params, from_variable = gates.with_variable_gates({"profile": "smoke", **unset}, variable)
        assert params == {"profile": "smoke", "gates": [{**OK, "ratio": 0.5}]} and from_variable
    assert gates.with_variable_gates({"profile": "smoke"}, None) == ({"profile": "smoke"}, False)
    assert gates.with_variable_gates({"profile": "smoke"}, "  ") == ({"profile": "smoke"}, False)


@pytest.mark.parametrize(("variable", "words"), [
    ("{not json", "Airflow Variable dlbench_gates is not JSON"),
    (json.dumps(OK), "Airflow Variable dlbench_gates must hold a JSON list of gates"),
])
def test_a_bad_variable_is_refused_naming_it(variable, words):
    with pytest.raises(ConfigError, match=words):
        gates.with_variable_gates({}, variable)


def test_an_error_in_the_variable_s_gates_says_where_they_came_from():
    params, from_variable = gates.with_variable_gates({"platforms": ["bare_metal", "container_on_bare_metal"]},
                                                      json.dumps([{**OK, "platform": "container_on_vm"}]))
    with pytest.raises(ConfigError) as exc:
        parse_request(params)
    note = gates.source_note(str(exc.value), from_variable)
    assert "gates[0].platform: 'container_on_vm' is not measured by this run" in note
    assert note.endswith("(the gates come from the Airflow Variable dlbench_gates: the request declares none)")
    assert gates.source_note("invalid benchmark request:\n  models.0: bad", True).endswith("models.0: bad")


@pytest.fixture
def warehouse(tmp_path):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    engine = db.upgrade(db.engine_for(url))
    load_documents(engine, documents(), run=run_info(RUN, "paper", platforms=[*PLATFORMS], repetitions=5))
    engine.dispose()
    return url


def test_the_gates_step_writes_gates_json_beside_the_report(warehouse):
    request = parse_request({"platforms": [*PLATFORMS], "gates": [
        {"name": "containers near bare metal", "platform": "container_on_bare_metal", "metric": "throughput",
         "ratio": 0.8, "benchmark": "inceptionv3", "scenario": "single"},
        {"platform": "virtual_machine", "metric": "throughput", "ratio": 0.95, "benchmark": "resnet50",
         "scenario": "single"}]}).model_dump(mode="json")
    outcome = gates.evaluate_run(RUN, request, warehouse)
    assert [r.state.value for r in outcome.results] == ["passed", "failed"]
    assert outcome.failure.startswith("1 of 2 gate(s) did not pass:\ngate 'virtual_machine throughput >= 0.95 x BM "
                                      "(resnet50, single)' FAILED (at 95 %): 2 of 2 matching rows miss the threshold")
    assert "containers near bare metal" not in outcome.failure
    written = json.loads(storage.store().read_text(f"reports/{RUN}/gates.json"))
    assert outcome.url == storage.store().url_of(f"reports/{RUN}/gates.json")
    assert written["passed"] is False and written["summary"] == "gates: 1 of 2 passed (1 failed, 0 inconclusive)"
    assert [len(g["rows"]) for g in written["gates"]] == [2, 2]
    assert outcome.as_xcom()["passed"] is False and outcome.lines[0] == written["summary"]


def test_a_run_missing_from_the_warehouse_leaves_every_gate_inconclusive(warehouse):
    request = parse_request({"gates": [OK]}).model_dump(mode="json")
    outcome = gates.evaluate_run("never-loaded", request, warehouse)
    [result] = outcome.results
    assert result.state.value == "inconclusive" and "'never-loaded' is not in the warehouse" in result.reason
    assert "INCONCLUSIVE" in outcome.failure
