"""Pass/fail gates evaluated on a real warehouse (the demo run: 3 platforms, 5 repetitions, one
cell with 2): the interval's end decides, not the mean; every matching row must pass; no interval
or no row is "inconclusive" and fails by default; the gate's confidence is the interval's (docs/gates.md)."""

from __future__ import annotations

import json
import math

import pytest

from dlbench.reports.analysis import compare, run_data
from dlbench.reports.analysis import gates as g
from dlbench.reports.sections import gates as gates_section
from dlbench.request import Gate, parse_request
from dlbench.warehouse import db
from dlbench.warehouse.load import load_documents
from tests.reports.demo_run import PLATFORMS, RUN, documents, run_info


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """(samples frame, step outliers) of the demo run, loaded into a real SQLite warehouse."""
    path = tmp_path_factory.mktemp("gates") / "warehouse.db"
    engine = db.upgrade(db.engine_for(f"sqlite:///{path}"))
    load_documents(engine, documents(), run=run_info(RUN, "paper", platforms=[*PLATFORMS], repetitions=5,
                                                     scenarios=["single", "distributed", "shared"]))
    frame, outliers = compare.samples_frame(engine, RUN), compare.step_checks(engine, RUN)
    engine.dispose()
    return frame, outliers


def gate(**fields) -> Gate:
    return Gate.model_validate(fields)


def one(demo, **fields) -> g.GateResult:
    frame, outliers = demo
    [result] = g.evaluate([gate(**fields)], frame, outliers)
    return result


def test_a_gate_on_every_matching_row_passes_when_each_lower_end_clears_it(demo):
    # The VM runs inceptionv3 at ~0.89-0.90 x bare metal with 1 % noise, 5 repetitions per side.
    result = one(demo, platform="virtual_machine", metric="throughput", ratio=0.85, scenario="single",
                 benchmark="inceptionv3")
    assert result.state is g.GateState.PASSED, result
    assert sorted(r.case for r in result.rows) == ["inceptionv3 single real batch 32 224px",
                                                   "inceptionv3 single synthetic batch 32 224px"]
    assert all(r.op == ">=" and r.ci_low >= 0.85 and r.ci_low < r.normalized < r.ci_high and r.n == 5
               for r in result.rows), result.rows


def test_the_lower_end_decides_not_the_mean(demo):
    """A mean above the threshold whose interval reaches below it is not evidence of the SLA, nor of
    its miss: inconclusive (issue 39: it read "failed"), and that still fails the run by default."""
    result = one(demo, platform="virtual_machine", metric="throughput", op=">=", ratio=0.90, benchmark="inceptionv3",
                 data="real", scenario="single")
    [row] = result.rows
    assert row.normalized >= 0.90 > row.ci_low, row
    assert result.state is g.GateState.INCONCLUSIVE and row.state is g.GateState.INCONCLUSIVE and not result.passed
    assert row.reason.startswith("interval [") and "straddles 0.9: more repetitions would narrow it" in row.reason
    assert g.failed([result]) == [result] and g.failed([result], g.POLICY_WARN) == []
    assert "INCONCLUSIVE" in g.failure_message([result]) and g.failure_message([result], g.POLICY_WARN) is None


def test_a_whole_interval_beyond_the_threshold_fails_and_the_docs_example_is_inconclusive(demo):
    """Failed means shown beyond the threshold; the docs' own example 0.744 [0.259, 2.14] against
    0.75 is no evidence either way (issue 39)."""
    from types import SimpleNamespace

    spec = SimpleNamespace(name=None, platform="container_on_vm", metric="throughput", op=">=", ratio=0.75,
                           confidence=0.95, suite=None, benchmark=None, scenario=None, data=None)

    def row(normalized: float, low: float, high: float) -> SimpleNamespace:
        return SimpleNamespace(higher_is_better=True, normalized_ci_low=low, normalized_ci_high=high,
                               verdict="inconclusive", n=3, baseline_n=3, case="c", suite="s",
                               name="b", scenario="single", metric="throughput", unit="img/s",
                               platform="container_on_vm", normalized=normalized, flags="")

    assert g.judge_row(spec, row(0.744, 0.259, 2.14)).state is g.GateState.INCONCLUSIVE
    below = g.judge_row(spec, row(0.60, 0.55, 0.66))
    assert below.state is g.GateState.FAILED and below.reason == "whole interval below 0.75 (upper end 0.66)"
    assert g.judge_row(spec, row(0.80, 0.76, 0.84)).state is g.GateState.PASSED
    at_most = SimpleNamespace(**{**vars(spec), "op": "<="})
    assert g.judge_row(at_most, row(0.80, 0.76, 0.84)).state is g.GateState.FAILED
    assert g.judge_row(at_most, row(0.70, 0.60, 0.80)).state is g.GateState.INCONCLUSIVE


def test_one_failing_row_fails_the_gate_and_each_row_is_named(demo):
    # Synthetic data, all three models: alexnet's VM interval clears 0.90, the other two do not.
    result = one(demo, platform="virtual_machine", metric="throughput", ratio=0.90, suite="tf_cnn", data="synthetic",
                 scenario="single")
    states = {r.benchmark: r.state for r in result.rows}
    # inceptionv3's whole interval is below 0.90; resnet50's [0.881, 0.911] straddles it.
    assert states == {"alexnet": g.GateState.PASSED, "inceptionv3": g.GateState.FAILED,
                      "resnet50": g.GateState.INCONCLUSIVE}, result.rows
    assert result.state is g.GateState.FAILED
    assert result.reason.startswith("1 of 3 matching rows miss the threshold; 1 more inconclusive; ")
    assert "1 of 3 rows flagged (noisy: CV 5%): read their intervals with care" in result.reason  # says so
    message = g.failure_message([result])
    # No op given: the metric's direction (throughput: higher is better), named in the label.
    assert "gate 'virtual_machine throughput >= 0.9 x BM (tf_cnn, single, synthetic)' FAILED (at 95 %)" in message
    assert "inceptionv3 single synthetic" in message and "resnet50 single synthetic" in message
    assert "alexnet" not in message  # the passing row is in gates.json and the report, not in the failure


def test_a_lower_is_better_metric_is_judged_on_the_upper_end(demo):
    fields = {"platform": "virtual_machine", "metric": "elapsed_time", "benchmark": "inceptionv3", "scenario": "single"}
    loose, tight, beyond = (one(demo, ratio=r, **fields) for r in (1.25, 1.13, 1.05))
    assert loose.state is g.GateState.PASSED and all(r.op == "<=" and r.ci_high <= 1.25 for r in loose.rows)
    assert tight.state is g.GateState.INCONCLUSIVE  # again: not the mean, and not shown beyond either
    assert any(r.normalized <= 1.13 < r.ci_high for r in tight.rows), tight.rows
    assert beyond.state is g.GateState.FAILED and all(r.ci_low > 1.05 for r in beyond.rows if r.state == "failed")


def test_too_few_repetitions_is_inconclusive_and_fails(demo):
    # alexnet on real data has 2 repetitions: no interval, no evidence, whatever its mean.
    result = one(demo, platform="container_on_bare_metal", metric="throughput", ratio=0.01, benchmark="alexnet",
                 data="real")
    [row] = result.rows
    assert result.state is g.GateState.INCONCLUSIVE and not result.passed
    assert row.ci_low is None and row.normalized > 0.01
    assert "too few repetitions for an interval (n=2, bare metal n=2)" in row.reason
    assert "INCONCLUSIVE" in g.failure_message([result])


def test_a_gate_matching_no_row_is_inconclusive_saying_what_there_is(demo):
    result = one(demo, platform="virtual_machine", metric="thruput", ratio=0.9)
    assert result.state is g.GateState.INCONCLUSIVE and result.rows == ()
    assert result.reason.startswith("no row of the comparison matches the gate; metrics of virtual_machine in this "
                                    "run:") and "throughput" in result.reason
    absent = one(demo, platform="container_on_vm", metric="throughput", ratio=0.9)
    assert absent.state is g.GateState.INCONCLUSIVE and "this run has no result of container_on_vm" in absent.reason


def test_the_gate_s_confidence_is_the_interval_s(demo):
    frame, outliers = demo
    fields = {"platform": "virtual_machine", "metric": "throughput", "benchmark": "inceptionv3", "data": "real",
              "scenario": "single"}
    at = {c: compare.statistics(frame, outliers, confidence=c) for c in (0.8, 0.999)}
    lows = {c: s[(s.platform == "virtual_machine") & (s.metric == "throughput") & (s.case.str.startswith(
        "inceptionv3 single real"))]["normalized_ci_low"].item() for c, s in at.items()}
    assert lows[0.999] < lows[0.8]
    between = (lows[0.8] + lows[0.999]) / 2
    confident, sure = g.evaluate([gate(**fields, ratio=between, confidence=0.8),
                                  gate(**fields, ratio=between, confidence=0.999)], frame, outliers)
    assert confident.state is g.GateState.PASSED and sure.state is g.GateState.INCONCLUSIVE
    assert math.isclose(confident.rows[0].ci_low, lows[0.8]) and math.isclose(sure.rows[0].ci_low, lows[0.999])
    with pytest.raises(ValueError, match="use statistics_at"):
        g.evaluate_gate(gate(**fields, ratio=0.5), at[0.8])


def test_results_as_text_html_and_json(demo):
    frame, outliers = demo
    results = g.evaluate([gate(name="VM <fast> enough", platform="virtual_machine", metric="throughput", ratio=0.85,
                               benchmark="inceptionv3", scenario="single"),
                          gate(platform="virtual_machine", metric="hpl", ratio=2.0)], frame, outliers)
    lines = g.text_lines(results)
    assert lines[0] == "gates: 1 of 2 passed (1 failed, 0 inconclusive)"
    assert lines[1].startswith("  PASSED    VM <fast> enough (at 95 %)")
    assert any(line.startswith("  FAILED    virtual_machine hpl >= 2 x BM (at 95 %)") for line in lines), lines
    assert any("hpcc: " in line and " x BM [" in line and "whole interval below 2" in line for line in lines), lines
    page = gates_section.html_section(results)
    assert "VM &lt;fast&gt; enough" in page and "<fast>" not in page
    assert page.count("class='gate passed'") == 3 and page.count("class='gate failed'") == 2  # gates and rows
    data = json.loads(json.dumps(g.as_json(RUN, results)))
    assert data["passed"] is False and [x["state"] for x in data["gates"]] == ["passed", "failed"]
    assert data["gates"][1]["gate"] == {"name": None, "platform": "virtual_machine", "metric": "hpl", "op": None,
                                        "ratio": 2.0, "confidence": 0.95, "suite": None, "benchmark": None,
                                        "scenario": None, "data": None}
    row = data["gates"][1]["rows"][0]
    assert row["op"] == ">=" and row["state"] == "failed" and row["ci_low"] < row["normalized"] < row["ci_high"]
    assert gates_section.html_section([]) == "" and g.text_lines([]) == [] and g.failure_message(results[:1]) is None


def test_a_report_regenerated_from_the_warehouse_judges_the_archived_gates(tmp_path):
    """The run's validated request is archived in runs.config: the gates read back from it judge
    exactly as the request's own (``dlbench report`` has the warehouse, not the request)."""
    request = parse_request({"platforms": [*PLATFORMS], "gates": [
        {"platform": "virtual_machine", "metric": "throughput", "ratio": 0.85, "benchmark": "inceptionv3",
         "scenario": "single"},
        {"platform": "virtual_machine", "metric": "elapsed_time", "op": "<=", "ratio": 1.13, "confidence": 0.9}]})
    info = run_info(RUN, "paper", platforms=[*PLATFORMS], repetitions=5)
    info.config = request.model_dump(mode="json")
    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    load_documents(engine, documents(), run=info)
    _, config = run_data.run_request(engine, RUN)
    frame, outliers = compare.samples_frame(engine, RUN), compare.step_checks(engine, RUN)
    engine.dispose()
    from_archive = g.evaluate(g.archived(config), frame, outliers)
    from_request = g.evaluate(request.gates, frame, outliers)
    assert [r.as_dict() for r in from_archive] == [r.as_dict() for r in from_request]
    assert [r.state for r in from_archive] == [g.GateState.PASSED, g.GateState.INCONCLUSIVE]
    assert g.archived({}) == [] and g.archived({"gates": None}) == []


def test_the_report_shows_the_runs_gates_as_the_gates_task_judges_them(tmp_path):
    """The console and report.html judge the gates the run's archived request declared: one that
    passes, one that fails (its whole interval below the threshold) and one inconclusive (no interval: 2
    repetitions)."""
    from dlbench.reports import build_report, text_table

    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    info = run_info(RUN, "paper", platforms=[*PLATFORMS], repetitions=5)
    declared = [{"name": "vm-inception", "platform": "virtual_machine", "metric": "throughput", "ratio": 0.85,
                 "scenario": "single", "benchmark": "inceptionv3"},
                {"platform": "virtual_machine", "metric": "throughput", "op": ">=", "ratio": 0.95,
                 "benchmark": "inceptionv3", "data": "real", "scenario": "single"},
                {"platform": "virtual_machine", "metric": "throughput", "ratio": 0.5, "benchmark": "alexnet",
                 "data": "real", "scenario": "single"}]
    info.config["gates"] = [Gate.model_validate(d).model_dump(mode="json") for d in declared]
    load_documents(engine, documents(), run=info)
    text = text_table(engine, RUN, tmp_path)
    assert "gates: 1 of 3 passed (1 failed, 1 inconclusive)" in text, text
    page = build_report(engine, RUN, tmp_path / "report").read_text()
    assert "<h2 id='gates'>" in page and "href='#gates'" in page
    assert page.count("class='gate passed'") >= 1 and "class='gate failed'" in page
    assert "class='gate inconclusive'" in page
    engine.dispose()
