"""The report's scenarios (single, distributed, shared) from a real warehouse.

Documents are built as the pipeline writes them (role documents labelled with their role and
cell, one aggregate document per cell, shaped as :mod:`dlbench.pipeline.aggregate` makes them),
loaded with the warehouse's own loader, and every number the report shows is checked against
a computation done here from the values that were loaded.
"""

from __future__ import annotations

import json
import re
import statistics as st
import xml.etree.ElementTree as ET
from itertools import count
from typing import Any

import pytest
from sqlalchemy import text

from dlbench.reports import build_report, text_table
from dlbench.reports.analysis import metrics
from dlbench.reports.analysis.compare import problems, samples_frame, statistics
from dlbench.reports.sections import scenarios
from dlbench.warehouse.load import load_documents
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument, Status

RUN = "scen"
BASE = {"profile": "smoke", "data": "synthetic", "batch_size_per_device": 4, "image_size": 32, "num_classes": 10}
PLATFORMS = ("bare_metal", "container_on_bare_metal", "virtual_machine")
_ids = count()


def _doc(platform: str, rep: int, name: str, parameters: dict[str, Any], labels: dict[str, str] | None = None,
         *, suite: str = "tf_cnn", status: Status = Status.OK, error: str | None = None) -> ResultDocument:
    return ResultDocument(job_id=f"job{next(_ids)}", run_id=RUN, repetition=rep, status=status, error=error,
                          benchmark=Benchmark(suite=suite, name=name, parameters=parameters),
                          environment=Environment(hostname=f"h-{platform}", platform=Platform(platform)),
                          labels=labels or {})


def single(platform: str, rep: int, throughput: float, elapsed: float, *, model: str = "resnet50",
           explicit: bool = False) -> ResultDocument:
    """A single-instance document as the TF runner writes it (no scenario parameter, unless
    ``explicit``: both must be one case)."""
    d = _doc(platform, rep, model, {**BASE, **({"scenario": "single"} if explicit else {})})
    d.add("throughput", throughput, "images/s", model=model, data="synthetic", batch_size=4)
    d.add("elapsed_time", elapsed, "s", scope="process_start_to_end")
    d.add("measured_window_start", 1.7e9 + rep, "s")  # a clock reading: never tabled
    d.add("measured_window_end", 1.7e9 + rep + 3, "s")
    return d


def distributed(platform: str, rep: int, workers: tuple[float, float], elapsed: float, network: tuple[float, float],
                *, model: str = "resnet50", fail_worker: bool = False) -> list[ResultDocument]:
    """The role documents (ps, 2 workers, network) and the cell's aggregate document of one
    distributed cell. Worker parameters carry the cluster's addresses (they differ per platform)."""
    cell_id = f"cell{next(_ids)}"
    cluster = json.dumps({"ps": [f"{platform}-ps:22222"], "worker": [f"{platform}-w{i}:22222" for i in range(2)]})
    params = {**BASE, "scenario": "distributed", "mode": "distributed_replicated", "cluster": cluster}

    def role(name: str, index: int) -> dict[str, str]:
        return {"role": name, "task_index": str(index), "cell_job_id": cell_id, "target": platform}

    ps = _doc(platform, rep, model, {**params, "role": "ps", "task_index": 0}, role("ps", 0))
    ps.add("elapsed_time", elapsed + 5, "s", scope="process_start_to_end")
    docs = [ps]
    for i, rate in enumerate(workers):
        w = _doc(platform, rep, model, {**params, "role": "worker", "task_index": i}, role("worker", i))
        if fail_worker and i == 1:
            w.status, w.error = Status.FAILED, "worker 1 lost the parameter server"
        else:
            w.add("throughput", rate, "images/s", model=model, data="synthetic", batch_size=4)
            w.add("elapsed_time", elapsed - 1, "s", scope="process_start_to_end")
        docs.append(w)
    net = _doc(platform, rep, "network", {"scenario": "distributed"}, role("network", 0), suite="network")
    net.add("tcp_throughput", network[0], "Gbit/s")
    net.add("tcp_latency", network[1], "us")
    docs.append(net)
    cell = _doc(platform, rep, model, {k: v for k, v in params.items()} | {"role": "worker", "task_index": 0},
                {"role": "aggregate", "job_label": f"{platform}/tf_cnn/distributed/{model}/r{rep}",
                 "mode": "distributed_replicated"})
    cell.job_id = cell_id
    cell.add("elapsed_time", elapsed, "s", scope="first_launch_to_last_exit", clock="controller_monotonic")
    if fail_worker:
        cell.status, cell.error = Status.FAILED, f"role worker 1 ({platform}): worker 1 lost the parameter server"
    else:
        cell.add("throughput", sum(workers), "images/s", scope="cluster", workers=2, model=model, data="synthetic")
        for i, rate in enumerate(workers):
            cell.add("worker_throughput", rate, "images/s", task_index=i, model=model, data="synthetic")
        cell.add("measured_window_overlap", 0.97, "fraction", scope="workers")
        cell.add("network_tcp_throughput", network[0], "Gbit/s", path="worker -> ps")
        cell.add("network_tcp_latency", network[1], "us", path="worker -> ps")
    return [*docs, cell]


def degradation(alone: float, loaded: float, higher_is_better: bool) -> float:
    return (alone - loaded) / alone * 100 if higher_is_better else (loaded - alone) / alone * 100


def shared(platform: str, rep: int, alone: tuple[float, float], loaded: tuple[float, float], *,
           model: str = "resnet50", interference: str = "background", tenants: int = 1,
           batch: int | None = None, covered: bool = True) -> list[ResultDocument]:
    """Role documents (alone, foreground + background, or tenants) and the cell's document."""
    cell_id = f"cell{next(_ids)}"
    params = {**BASE, "scenario": "shared", "tenants": tenants}
    if batch is not None:
        params |= {"batch_size": batch, "batch_size_per_device": batch}

    def role(name: str, index: int) -> dict[str, str]:
        return {"role": name, "task_index": str(index), "cell_job_id": cell_id}

    docs = []
    solo = _doc(platform, rep, model, {**params, "condition": "alone"}, role("alone", 0))
    solo.add("throughput", alone[0], "images/s")
    solo.add("elapsed_time", alone[1], "s")
    docs.append(solo)
    names = ["foreground"] if interference == "background" else ["tenant"] * tenants
    for i, name in enumerate(names):
        d = _doc(platform, rep, model, {**params, "condition": "loaded"}, role(name, i))
        d.add("throughput", loaded[0], "images/s")
        d.add("elapsed_time", loaded[1], "s")
        d.add("minor_page_faults", 1000 + i, "count", scope="process")
        docs.append(d)
    if interference == "background":
        bg = _doc(platform, rep, "alexnet", {**BASE, "scenario": "shared", "condition": "background"},
                  role("background", 0))
        bg.add("throughput", 999.0, "images/s")
        docs.append(bg)
    labels = {"role": "aggregate", "job_label": f"{platform}/tf_cnn/shared/{model}/r{rep}"}
    if not covered:
        labels["background_covered"] = "false"
    cell = _doc(platform, rep, model, params | {"interference": interference}, labels)
    cell.job_id = cell_id
    kw = {"model": model, "data": "synthetic"}
    cell.add("throughput", loaded[0], "images/s", condition="loaded", **kw)
    cell.add("throughput_alone", alone[0], "images/s", condition="alone", **kw)
    cell.add("degradation_throughput", degradation(alone[0], loaded[0], True), "%", **kw)
    cell.add("elapsed_time", loaded[1], "s", condition="loaded", **kw)
    cell.add("elapsed_time_alone", alone[1], "s", condition="alone", **kw)
    cell.add("degradation_elapsed_time", degradation(alone[1], loaded[1], False), "%", **kw)
    if interference == "tenants":
        cell.add("tenants_throughput_sum", loaded[0] * tenants, "images/s", **kw)
    else:
        cell.add("background_throughput", 999.0, "images/s", model="alexnet", batch_size="64")
        cell.add("background_overlap", 30.0 if covered else 12.0, "s")
        cell.add("background_coverage", 1.0 if covered else 0.4, "fraction")
    cell.add("minor_page_faults", 1000, "count", role="foreground", scope="process")
    return [*docs, cell]


def raw_rows(engine) -> list[dict[str, Any]]:
    """Every loaded sample of the run with its execution's labels and benchmark's parameters,
    read with plain SQL (no report code)."""
    query = text("SELECT e.platform, e.job_id, e.status, e.labels AS elabels, b.suite, b.name, b.parameters, "
                 "s.metric, s.value, s.unit FROM samples s JOIN executions e ON s.execution_id = e.id "
                 "JOIN benchmarks b ON e.benchmark_id = b.id JOIN runs r ON e.run_pk = r.id WHERE r.run_id = :run")
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query, {"run": RUN}).mappings()]
    for row in rows:
        for key in ("elabels", "parameters"):
            if isinstance(row[key], str):
                row[key] = json.loads(row[key])
    return rows


def cell_values(rows: list[dict[str, Any]], scenario: str, metric: str, **where: Any) -> dict[str, list[float]]:
    """platform -> values of ``metric`` in the scenario's cell (or single) documents."""
    out: dict[str, list[float]] = {}
    for row in rows:
        role = row["elabels"].get("role")
        if role not in (None, "aggregate") or row["status"] != "ok" or row["metric"] != metric:
            continue
        if row["parameters"].get("scenario", "single") != scenario:
            continue
        if any(row["parameters"].get(k) != v for k, v in where.items()):
            continue
        out.setdefault(row["platform"], []).append(row["value"])
    return out


def svgs(page: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg.*?</svg>", page, flags=re.S)]


SVG = "{http://www.w3.org/2000/svg}"


def bar_values(svg: ET.Element) -> dict[str, tuple[Any, ...]]:
    """gid suffix -> (bar left x, right x, top y, value text, text x, text y, bar bottom y) for
    every bar of a figure (SVG y grows downwards)."""
    groups = {g.get("id"): g for g in svg.iter(f"{SVG}g") if g.get("id")}
    found = {}
    for gid, group in groups.items():
        if not gid.startswith("bar-"):
            continue
        d = next(group.iter(f"{SVG}path")).get("d")
        numbers = [float(x) for x in re.findall(r"-?\d+\.?\d*", d)]
        xs, ys = numbers[0::2], numbers[1::2]
        value = groups.get("value-" + gid[len("bar-"):])
        assert value is not None, f"bar {gid} has no value text"
        node = next(value.iter(f"{SVG}text"))
        tx, ty = (float(v) for v in re.search(r"translate\(([-\d.]+) ([-\d.]+)\)", node.get("transform")).groups())
        found[gid[len("bar-"):]] = (min(xs), max(xs), min(ys), node.text or "", tx, ty, max(ys))
    return found


def fmt(values: list[float], unit: str) -> str:
    """The mean and n, as the report prints them above a bar (4 significant digits). Issue 22: one
    notion of uncertainty, the error bar's interval; the text no longer adds a ± std."""
    return f"{st.mean(values):.4g} {unit} n={len(values)}"


# -- tests -----------------------------------------------------------------------------------------


def test_scenario_metrics_have_a_direction_and_a_place():
    assert metrics.direction("degradation_elapsed_time", "%") is metrics.LOWER
    assert metrics.direction("degradation_throughput", "%") is metrics.LOWER
    assert metrics.direction("background_overlap", "s") is metrics.HIGHER  # despite its time unit
    assert metrics.direction("network_tcp_latency", "us") is metrics.LOWER
    assert metrics.direction("worker_throughput", "images/s") is metrics.HIGHER
    assert metrics.HEADLINE["tf_cnn"] == ["throughput", "elapsed_time", "degradation_elapsed_time",
                                          "degradation_throughput"]
    for diagnostic in ("worker_throughput", "measured_window_overlap", "network_tcp_throughput", "throughput_alone",
                       "background_coverage", "tenants_throughput_sum"):
        assert metrics.is_diagnostic(diagnostic) and not metrics.is_headline("tf_cnn", diagnostic)
    assert not metrics.is_tabled("measured_window_start", {})


def test_role_documents_are_never_cases(engine):
    docs = [d for p, w in (("bare_metal", (50.0, 52.0)), ("container_on_bare_metal", (40.0, 41.0)))
            for rep in (0, 1) for d in distributed(p, rep, (w[0] + rep, w[1] + rep), 30.0 + rep, (0.9, 80.0))]
    failed = distributed("virtual_machine", 0, (30.0, 0.0), 40.0, (0.5, 200.0), fail_worker=True)
    load_documents(engine, docs + failed)
    role_jobs = {d.job_id for d in docs + failed if d.labels.get("role") not in (None, "aggregate")}
    cell_jobs = {d.job_id for d in docs if d.labels.get("role") == "aggregate"}
    frame = samples_frame(engine, RUN)
    assert set(frame["job_id"]) == cell_jobs and not role_jobs & set(frame["job_id"])
    assert set(frame["suite"]) == {"tf_cnn"}  # the network role's own document is not a case either
    stats = statistics(frame).set_index(["metric", "platform"])
    row = stats.loc[("throughput", "container_on_bare_metal")]
    assert row["n"] == 2 and row["mean"] == pytest.approx(st.mean([81.0, 83.0]))  # cells only, no worker
    assert stats.loc[("elapsed_time", "bare_metal")]["mean"] == pytest.approx(30.5)  # not the ps's 35.5
    bad = problems(engine, RUN)
    assert len(bad) == 1, bad  # the cell, not its failed worker's own document
    assert bad.iloc[0]["scenario"] == "distributed" and "role worker 1" in bad.iloc[0]["error"]
    table = text_table(engine, RUN)
    assert "FAILED: tf_cnn/resnet50 (distributed) on virtual_machine (r0; 1 run): role worker 1" in table
    assert table.count("FAILED") == 1


def test_single_and_distributed_are_never_merged(engine):
    docs = [single("bare_metal", 0, 100.0, 10.0), single("bare_metal", 1, 110.0, 11.0, explicit=True),
            single("container_on_bare_metal", 0, 90.0, 12.0), single("container_on_bare_metal", 1, 92.0, 12.5)]
    for p, w in (("bare_metal", (60.0, 62.0)), ("container_on_bare_metal", (45.0, 47.0))):
        for rep in (0, 1):
            docs += distributed(p, rep, (w[0] + rep, w[1] + rep), 40.0 + rep, (0.9, 90.0))
    load_documents(engine, docs)
    stats = statistics(samples_frame(engine, RUN))
    tput = stats[stats["metric"] == "throughput"]
    assert sorted(set(tput["scenario"])) == ["distributed", "single"]
    for platform in ("bare_metal", "container_on_bare_metal"):
        mine = tput[tput["platform"] == platform]
        assert len(mine) == 2, mine  # one case per scenario; "scenario" missing and "single" are one case
        names = dict(zip(mine["scenario"], mine["case"], strict=True))
        assert "single" in names["single"] and "distributed" in names["distributed"]
        assert "distributed_replicated" in names["distributed"] and names["single"] != names["distributed"]
    bm = tput[tput["platform"] == "bare_metal"].set_index("scenario")
    assert bm.loc["single", "mean"] == pytest.approx(105.0) and bm.loc["single", "n"] == 2
    assert bm.loc["distributed", "mean"] == pytest.approx(st.mean([122.0, 124.0]))
    assert not (stats["metric"].str.startswith("measured_window_s") | (stats["metric"] == "measured_window_end")).any()


def test_normalization_to_bare_metal_stays_within_a_scenario(engine):
    docs = []
    for p, t, e in (("bare_metal", 100.0, 10.0), ("container_on_bare_metal", 95.0, 10.5),
                    ("virtual_machine", 90.0, 11.0)):
        docs += [single(p, rep, t + 2 * rep, e + 0.2 * rep) for rep in (0, 1, 2)]
    for p, w, e in (("bare_metal", (70.0, 71.0), 50.0), ("container_on_bare_metal", (55.0, 57.0), 61.0),
                    ("virtual_machine", (50.0, 52.0), 66.0)):
        for rep in (0, 1, 2):
            docs += distributed(p, rep, (w[0] + rep, w[1]), e + rep, (0.9, 90.0))
    load_documents(engine, docs)
    rows = raw_rows(engine)
    stats = statistics(samples_frame(engine, RUN)).set_index(["scenario", "metric", "platform"])
    for scenario in ("single", "distributed"):
        for metric in ("throughput", "elapsed_time"):
            values = cell_values(rows, scenario, metric)
            bm = st.mean(values["bare_metal"])
            for platform in PLATFORMS:
                row = stats.loc[(scenario, metric, platform)]
                assert row["mean"] == pytest.approx(st.mean(values[platform]), rel=1e-12)
                assert row["normalized"] == pytest.approx(st.mean(values[platform]) / bm, rel=1e-12)
                assert row["diff_pct"] == pytest.approx((bm - st.mean(values[platform])) / bm * 100, rel=1e-9, abs=1e-9)
    # Against the other scenario's bare metal the numbers would differ: the test can tell.
    cross = st.mean(cell_values(rows, "distributed", "throughput")["virtual_machine"]) / st.mean(
        cell_values(rows, "single", "throughput")["bare_metal"])
    assert stats.loc[("distributed", "throughput", "virtual_machine")]["normalized"] != pytest.approx(cross)
    # The distributed cells' parameters name per-platform addresses (the cluster); bare metal is
    # still every platform's baseline.
    assert stats.loc[("distributed", "throughput", "virtual_machine")]["normalized"] == pytest.approx(
        (st.mean([50.0, 51.0, 52.0]) + 52.0) / (st.mean([70.0, 71.0, 72.0]) + 71.0), rel=1e-12)


def shared_run() -> list[ResultDocument]:
    """Three platforms x two repetitions of: resnet50 with background, the control (alexnet batch 4)
    with background, resnet50 as 2 tenants. Container on VM's control cell is not covered."""
    docs = []
    loads = {"bare_metal": (0.70, 1.40), "container_on_bare_metal": (0.85, 1.15), "virtual_machine": (0.95, 1.05)}
    for platform, (t_factor, e_factor) in loads.items():
        for rep in (0, 1):
            alone = (100.0 + rep, 10.0 + rep * 0.5)
            loaded = (alone[0] * (t_factor - 0.03 * rep), alone[1] * (e_factor + 0.05 * rep))
            docs += shared(platform, rep, alone, loaded)
            docs += shared(platform, rep, (300.0, 4.0), (300.0 * (t_factor + 0.1), 4.0 * (e_factor - 0.02 * rep)),
                           model="alexnet", batch=4, covered=not (platform == "virtual_machine" and rep == 1))
            docs += shared(platform, rep, alone, (alone[0] * t_factor * 0.9, alone[1] * e_factor * 1.2),
                           interference="tenants", tenants=2)
    return docs


def test_degradation_figure_shows_the_cells_means_per_platform(engine, tmp_path):
    docs = shared_run()
    load_documents(engine, docs)
    frame = samples_frame(engine, RUN)
    stats = statistics(frame)
    kinds = scenarios.shared_kinds(frame)
    assert sorted(kinds.values()) == ["background", "control", "tenants"]
    cells = [d for d in docs if d.labels.get("role") == "aggregate"]
    for metric in ("degradation_elapsed_time", "degradation_throughput"):
        bars = scenarios.degradation_bars(stats, kinds, metric)
        groups = list(dict.fromkeys(b.group for b in bars))
        assert len(groups) == 3 and groups[1].startswith("control: alexnet")  # background, control, tenants
        assert "with background" in groups[0] and "2 tenants" in groups[2]
        for bar in bars:
            group = groups.index(bar.group)
            expected = [d.sample(metric).value for d in cells if d.environment.platform.value == bar.platform
                        and (d.benchmark.parameters["interference"], d.benchmark.name) ==
                        [("background", "resnet50"), ("background", "alexnet"), ("tenants", "resnet50")][group]]
            assert len(expected) == 2
            assert bar.height == pytest.approx(st.mean(expected), rel=1e-12)
            # Issue 22: no std error bar; a degradation is not compared, so it has no interval to draw.
            assert not bar.has_interval
        assert {b.platform for b in bars} == set(PLATFORMS)
    # Bare metal degrades most here (as in the study): its elapsed-time bar with background is the highest.
    elapsed = scenarios.degradation_bars(stats, kinds, "degradation_elapsed_time")
    first = {b.platform: b.height for b in elapsed if "with background" in b.group and "control" not in b.group}
    assert max(first, key=first.get) == "bare_metal" and first["bare_metal"] == pytest.approx(42.5)
    page = build_report(engine, RUN, tmp_path / "r").read_text()
    figure10 = page.split("id='scenario-shared-degradation'")[1]
    figure = svgs(figure10)[0]
    values = bar_values(figure)
    assert len(values) == len(elapsed) == 9
    for bar in elapsed:
        match = [v for v in values.values() if v[3] == bar.text]
        assert match, f"no value text {bar.text!r} in figure 10"
    for platform in PLATFORMS:
        expected = [d.sample("degradation_elapsed_time").value for d in cells
                    if d.environment.platform.value == platform and d.benchmark.name == "resnet50"
                    and d.benchmark.parameters["interference"] == "background"]
        left, right, top, label, tx, ty, _ = values[f"shared-degradation_elapsed_time-{platform}-0"]
        assert label == fmt(expected, "%")
        assert left <= tx <= right and ty < top  # the value is printed above its bar
    # The uncovered cell is named, once in the shared column and once by figure 10; others are not.
    warning = "virtual_machine alexnet with background synthetic batch 4 32px repetition 1"
    assert page.count(warning) == 2 and "covered 40%" in page
    assert "container_on_bare_metal alexnet with background synthetic batch 4 32px repetition" not in page
    assert "WARNING: shared virtual_machine alexnet with background" in text_table(engine, RUN)


def test_html_shows_the_three_scenarios_with_values_above_bars(engine, tmp_path):
    docs = [single(p, rep, t + rep, e + 0.1 * rep) for p, t, e in (("bare_metal", 100.0, 10.0),
            ("container_on_bare_metal", 97.0, 10.4), ("virtual_machine", 91.0, 11.2)) for rep in (0, 1)]
    docs += [d for p, w in (("bare_metal", 60.0), ("container_on_bare_metal", 48.0), ("virtual_machine", 45.0))
             for rep in (0, 1) for d in distributed(p, rep, (w + rep, w + 2), 50.0 + rep, (0.9, 80.0))]
    docs += shared_run()
    cell = next(d for d in docs if d.labels.get("role") == "aggregate" and d.environment.platform.value ==
                "virtual_machine" and d.benchmark.parameters.get("scenario") == "distributed" and d.repetition == 1)
    cell.labels["network_error"] = "network measurement failed: iperf3 refused"
    load_documents(engine, docs)
    rows = raw_rows(engine)
    page = build_report(engine, RUN, tmp_path / "r").read_text()
    assert "<h2 id='scenarios'>Scenarios</h2>" in page and "Not run" not in page
    columns = {s: page.split(f"<div id='scenario-{s}'>")[1].split("<div id='scenario-")[0].split(
        "id='scenario-shared-degradation'")[0] for s in ("single", "distributed", "shared")}
    units = {"throughput": "images/s", "elapsed_time": "s"}
    for scenario, column in columns.items():
        figures = svgs(column)
        assert len(figures) == 2, scenario  # throughput and elapsed time
        for figure, metric in zip(figures, ("throughput", "elapsed_time"), strict=True):
            values = bar_values(figure)
            where = {"interference": "background", "batch_size": None} if scenario == "shared" else {}
            expected = cell_values(rows, scenario, metric, **where)
            for platform in PLATFORMS:
                left, right, top, label, tx, ty, _ = values[f"{scenario}-{metric}-{platform}-0"]
                assert label == fmt(expected[platform], units[metric]), (scenario, metric, platform)
                assert left <= tx <= right and ty < top, (scenario, metric, platform)
            # The bars' heights are the means normalized to bare metal's (the axis starts at 0).
            bm = st.mean(expected["bare_metal"])
            bm_px = values[f"{scenario}-{metric}-bare_metal-0"][6] - values[f"{scenario}-{metric}-bare_metal-0"][2]
            for platform in PLATFORMS:
                bar = values[f"{scenario}-{metric}-{platform}-0"]
                assert (bar[6] - bar[2]) / bm_px == pytest.approx(st.mean(expected[platform]) / bm, rel=1e-4)
    assert "Network between the worker and parameter-server instances" in columns["distributed"]
    assert "0.9 ± 0 Gbit/s" in columns["distributed"]  # several cells: a mean ± std, not one value
    assert ("virtual_machine resnet50 distributed_replicated synthetic batch 4 32px repetition 1: network measurement "
            "failed: iperf3 refused") in columns["distributed"]
    table = text_table(engine, RUN)
    assert "Scenarios (tf_cnn): single: 1 cell; distributed: 1 cell; shared: 3 cells" in table
    # Issue 22: the console's answer is grouped by scenario, data kind and framework, by cell name.
    lines = table.splitlines()
    group = lines.index("distributed · synthetic data · TensorFlow")
    assert lines[group + 1].startswith("  resnet50 distributed_replicated synthetic batch 4 32px (bare metal: ")


def test_a_single_only_run_renders_and_says_what_did_not_run(engine, tmp_path):
    """Issue 22: "not run" only for what the request asked for. This run asked for all three
    scenarios and only single came back."""
    from dlbench.warehouse.load import RunInfo

    docs = [single(p, rep, t + rep, e) for p, t, e in (("bare_metal", 100.0, 10.0),
                                                     ("container_on_bare_metal", 90.0, 11.0)) for rep in (0, 1)]
    load_documents(engine, docs, run=RunInfo(run_id=RUN, profile="smoke", config={
        "profile": "smoke", "scenarios": ["single", "distributed", "shared"]}))
    page = build_report(engine, RUN, tmp_path / "r").read_text()
    single_col = page.split("<div id='scenario-single'>")[1].split("<div id='scenario-distributed'>")[0]
    dist_col = page.split("<div id='scenario-distributed'>")[1].split("<div id='scenario-shared'>")[0]
    shared_col = page.split("<div id='scenario-shared'>")[1]
    assert len(svgs(single_col)) == 2 and "Not run" not in single_col
    assert "Not run: the request's <code>scenarios</code> asked for distributed" in dist_col and not svgs(dist_col)
    assert "Not run: the request's <code>scenarios</code> asked for shared" in shared_col and not svgs(shared_col)
    assert page.count("data:image/png;base64,") == 0  # issue 22: each chart once (the study figures)
    values = bar_values(svgs(single_col)[0])
    assert values["single-throughput-container_on_bare_metal-0"][3] == fmt([90.0, 91.0], "images/s")
    assert "distributed: not run; shared: not run" in text_table(engine, RUN)


def test_scenarios_not_requested_are_not_called_not_run(engine, tmp_path):
    """A run that asked only for single says nothing of the other scenarios (no "not run", no
    empty columns); a run loaded without its request cannot tell, so it calls nothing "not run"."""
    from dlbench.warehouse.load import RunInfo

    docs = [single(p, rep, t + rep, e) for p, t, e in (("bare_metal", 100.0, 10.0),
                                                     ("container_on_bare_metal", 90.0, 11.0)) for rep in (0, 1)]
    load_documents(engine, docs, run=RunInfo(run_id=RUN, profile="smoke", config={"scenarios": ["single"]}))
    page = build_report(engine, RUN, tmp_path / "r").read_text()
    assert "<div id='scenario-single'>" in page and len(svgs(page.split("<div id='scenario-single'>")[1])) >= 2
    assert "scenario-distributed" not in page and "scenario-shared" not in page and "Not run" not in page
    table = text_table(engine, RUN)
    assert "Scenarios (tf_cnn): single: 1 cell" in table and "not run" not in table
    # The legend lists the platforms that ran, in the palette's colours, and nothing else.
    legend = page.split("<p class='note legend'>")[1].split("</p>")[0]
    assert re.findall(r"data-platform='([a-z_]+)' style='background:(#[0-9a-f]{6})'", legend) == [
        ("bare_metal", "#4c72b0"), ("container_on_bare_metal", "#55a868")]


def test_a_failed_scenario_is_not_called_not_run(engine, tmp_path):
    docs = [single("bare_metal", 0, 100.0, 10.0)]
    docs += distributed("bare_metal", 0, (50.0, 0.0), 40.0, (0.9, 80.0), fail_worker=True)
    load_documents(engine, docs)
    page = build_report(engine, RUN, tmp_path / "r").read_text()
    dist_col = page.split("<div id='scenario-distributed'>")[1].split("<div id='scenario-shared'>")[0]
    assert "No successful distributed cell: 1 failed or skipped" in dist_col and "Not run" not in dist_col
    assert "role worker 1" in page.split("Failed or skipped")[1].split("<h2")[0]
