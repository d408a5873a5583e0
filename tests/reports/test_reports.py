"""Reports computed from the warehouse, checked against numbers computed here independently."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics as st
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from dlbench.reports import build_report, text_table
from dlbench.reports.analysis import metrics
from dlbench.reports.analysis.compare import latest_run_id, samples_frame, statistics
from dlbench.warehouse.load import load_documents
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument, Status
from tests.warehouse.realdocs import RUN_ID, raw_samples

DLBENCH = Path(sys.executable).with_name("dlbench")


def tf_doc(platform: str, rep: int, throughput: float, elapsed: float, *, run_id: str = "r1", model: str = "resnet50",
           status: Status = Status.OK, error: str | None = None) -> ResultDocument:
    d = ResultDocument(
        run_id=run_id, repetition=rep, status=status, error=error,
        benchmark=Benchmark(suite="tf_cnn", name=model, parameters={
            "data": "synthetic", "profile": "smoke", "batch_size_per_device": 4, "image_size": 32}),
        environment=Environment(hostname="h", platform=Platform(platform)),
    )
    if status is Status.OK:
        d.add("throughput", throughput, "images/s", model=model, data="synthetic", batch_size=4)
        d.add("elapsed_time", elapsed, "s", scope="process_start_to_end")
        for step in range(5):  # per-step samples: in the warehouse, never in a table
            d.add("step_time", 0.1 + step, "s", step=step, warmup=step < 1)
        d.add("syscalls", 1000 + rep, "count", scope="process", source="strace")
        d.add("syscalls", 7, "count", scope="process", source="strace", syscall="futex")
    return d


def disk_doc(platform: str, rep: int, bandwidth: float, latency_us: float, run_id: str = "r1") -> ResultDocument:
    d = ResultDocument(run_id=run_id, repetition=rep, benchmark=Benchmark(suite="disk", name="disk"),
                       environment=Environment(hostname="h", platform=Platform(platform)))
    d.add("dd_write_bandwidth", bandwidth, "MB/s", size_mb=64)
    d.add("ioping_latency", latency_us, "us", variant="random", statistic="avg")
    return d


def test_metric_directions_come_from_one_table():
    assert metrics.direction("throughput", "images/s") is metrics.HIGHER
    assert metrics.direction("elapsed_time", "s") is metrics.LOWER
    assert metrics.direction("fio_latency", "us") is metrics.LOWER
    assert metrics.direction("tcp_retransmits", "count") is metrics.LOWER  # in the table, despite its unit
    # Not in the table: a time unit means lower is better, anything else higher.
    for unit in ("s", "ms", "us", "ns"):
        assert metrics.direction("new_metric", unit) is metrics.LOWER
    for unit in ("GB/s", "count", "ops"):
        assert metrics.direction("new_metric", unit) is metrics.HIGHER
    assert not metrics.is_tabled("step_time", {"step": 3})
    assert not metrics.is_tabled("syscalls", {"syscall": "futex"})
    assert metrics.is_tabled("syscalls", {"scope": "process"})
    assert metrics.is_headline("tf_cnn", "throughput") and not metrics.is_headline("tf_cnn", "setup_time")
    # the executor's clocks (docs/clocks.md) explain, they do not rank
    assert metrics.is_diagnostic("teardown_time") and metrics.is_diagnostic("launch_to_end_time")
    assert metrics.is_headline("some_new_suite", "widgets") and not metrics.is_headline("some_new_suite", "cgroup_x")


def test_statistics_diff_and_normalization(engine):
    bm = [(100.0, 10.0), (110.0, 12.0), (90.0, 11.0)]
    ct = [(80.0, 15.0), (90.0, 14.0), (85.0, 16.0)]
    docs = [tf_doc("bare_metal", i, t, e) for i, (t, e) in enumerate(bm)]
    docs += [tf_doc("container_on_bare_metal", i, t, e) for i, (t, e) in enumerate(ct)]
    docs.append(tf_doc("container_on_bare_metal", 3, 0, 0, status=Status.SKIPPED, error="no Docker engine"))
    load_documents(engine, docs)
    frame = samples_frame(engine, "r1")
    assert "step_time" not in set(frame["metric"])
    assert not any("syscall" in labels for labels in frame["labels"])
    stats = statistics(frame).set_index(["metric", "platform"])
    row = stats.loc[("throughput", "container_on_bare_metal")]
    h, d = st.mean(t for t, _ in bm), st.mean(t for t, _ in ct)
    assert row["n"] == 3  # the skipped execution has no samples
    assert row["mean"] == pytest.approx(85.0)
    assert row["std"] == pytest.approx(st.stdev([80.0, 90.0, 85.0]))  # sample std over repetitions
    assert row["cv"] == pytest.approx(5.0 / 85.0)
    assert row["diff_pct"] == pytest.approx((h - d) / h * 100) == pytest.approx(15.0)
    assert row["normalized"] == pytest.approx(0.85)
    base = stats.loc[("throughput", "bare_metal")]
    assert (base["normalized"], base["diff_pct"]) == (pytest.approx(1.0), pytest.approx(0.0))
    elapsed = stats.loc[("elapsed_time", "container_on_bare_metal")]
    assert elapsed["normalized"] == pytest.approx(15.0 / 11.0)
    assert elapsed["diff_pct"] == pytest.approx((11.0 - 15.0) / 11.0 * 100)
    assert not bool(elapsed["higher_is_better"]) and bool(row["higher_is_better"])


def test_real_runner_documents_against_an_independent_computation(engine, real_documents, tmp_path):
    """Load what the real TF runner wrote; recompute every headline number from the raw JSON."""
    load_documents(engine, sorted(real_documents.glob("*.json")))
    page = build_report(engine, RUN_ID, tmp_path / "report")
    with (tmp_path / "report" / "comparison.csv").open() as handle:
        table = {(r["metric"], r["platform"]): r for r in csv.DictReader(handle)}
    stats = statistics(samples_frame(engine, RUN_ID)).set_index(["metric", "platform"])
    text = text_table(engine, RUN_ID)
    for metric in ("throughput", "elapsed_time"):
        raw = raw_samples(real_documents, metric)
        h, d = st.mean(raw["bare_metal"]), st.mean(raw["container_on_bare_metal"])
        expected = {"n": len(raw["container_on_bare_metal"]), "mean": d,
                    "std": st.stdev(raw["container_on_bare_metal"]),
                    "cv": st.stdev(raw["container_on_bare_metal"]) / d,
                    "diff_pct": (h - d) / h * 100, "normalized": d / h}
        row = stats.loc[(metric, "container_on_bare_metal")]
        written = table[(metric, "container_on_bare_metal")]
        for key, value in expected.items():
            assert row[key] == pytest.approx(value, rel=1e-9), (metric, key)
            assert float(written[key]) == pytest.approx(value, rel=1e-9), (metric, key)
        assert f"{d / h:.3g}" in text  # the printed normalized value
    assert ("step_time", "bare_metal") not in table
    html = page.read_text()
    # Issue 22: each chart once. Training's throughput and elapsed time are drawn in the study
    # figures (SVG), no longer a second time as PNG charts of the tf_cnn suite.
    assert html.count("data:image/png;base64,") == 0
    assert "id=\"axes-single-throughput\"" in html and "id=\"axes-single-elapsed_time\"" in html
    assert "Diff% = (H − D) / H × 100" in html and "normalized = D / H" in html


def test_report_sections_problems_and_latest_run(engine, tmp_path):
    with pytest.raises(LookupError, match="no run"):
        build_report(engine, None, tmp_path / "empty")
    old = [tf_doc("bare_metal", 0, 50.0, 20.0, run_id="old")]
    old[0].started_at = datetime(2026, 1, 1, tzinfo=UTC)
    load_documents(engine, old)
    docs = [tf_doc(p, r, t + r, e + r) for p, t, e in (("bare_metal", 100.0, 10.0), ("container_on_bare_metal", 90.0,
                                                                                       12.0)) for r in (0, 1)]
    docs += [disk_doc(p, r, b + r, lat) for p, b, lat in (("bare_metal", 200.0, 50.0),
                                                          ("container_on_bare_metal", 150.0, 80.0)) for r in (0, 1)]
    docs.append(tf_doc("container_on_vm", 0, 0, 0, status=Status.SKIPPED,
                       error="container platform skipped: no Docker engine reachable"))
    docs.append(tf_doc("virtual_machine", 0, 0, 0, status=Status.FAILED, error="RuntimeError: out of memory"))
    load_documents(engine, docs)
    assert latest_run_id(engine) == "r1"
    page = build_report(engine, None, tmp_path / "r")  # None: the latest run
    html = page.read_text()
    assert "<h1>Benchmark report: r1</h1>" in html
    assert "<h2>tf_cnn</h2>" in html and "<h2>disk</h2>" in html
    problems = html.split("Failed or skipped")[1].split("<h2>")[0]
    assert "container platform skipped: no Docker engine reachable" in problems
    assert "RuntimeError: out of memory" in problems and "skipped" in problems and "failed" in problems
    # Issue 22: each chart once: disk's 2 metrics as PNG; training only in the study figures (SVG).
    assert html.count("data:image/png;base64,") == 2
    table = text_table(engine, "r1", tmp_path / "r")
    assert "SKIPPED: tf_cnn/resnet50 on container_on_vm (r0; 1 run): container platform skipped" in table
    assert "FAILED: tf_cnn/" in table and " on virtual_machine (r" in table
    # Issue 22: the console answers first (training), the micro-benchmarks follow as one line per
    # suite and platform, the full table is in the files it names.
    lines = table.splitlines()
    answer = lines.index("ANSWER: training, each platform against bare metal")
    assert lines[answer + 1] == "single · synthetic data · TensorFlow"
    assert lines[answer + 2].startswith("  resnet50 synthetic batch 4 32px (bare metal: 100.5 images/s, 10.5 s; n=2)")
    row = lines[answer + 3].split()
    assert row[:6] == ["container_on_bare_metal", "throughput", "↑", f"{90.5 / 100.5:#.3g}×", "too-few", "n=2/2"]
    assert "[" not in lines[answer + 3]  # too few repetitions: no interval at all
    grade = next(i for i, line in enumerate(lines) if line.startswith("NOT DECISION-GRADE"))
    assert answer < grade
    micro = [line for line in lines if line.startswith("  disk ")]
    assert len(micro) == 1 and "container_on_bare_metal" in micro[0] and "2 too-few" in micro[0]
    # the least favourable disk metric: latency 80/50 us (lower is better) beats bandwidth 150.5/200.5
    assert f"ioping_latency ↓ {80.0 / 50.0:#.3g}×BM" in micro[0]
    assert "ioping_latency" not in "\n".join(lines[:grade])  # micro-benchmarks never come before the answer
    assert f"{tmp_path / 'r' / 'comparison.csv'}" in table and f"{tmp_path / 'r' / 'report.html'}" in table
    # One repetition: no spread, no interval; only bare metal ran, so nothing compares with it.
    old = text_table(engine, "old")
    assert "(bare metal: 50 images/s, 20 s; n=1)" in old
    assert "no training cell compares a platform with bare metal" in old
    with pytest.raises(LookupError, match="'nope' is not in the warehouse"):
        build_report(engine, "nope", tmp_path / "x")


def test_cli_upgrade_load_reload_and_report(warehouse_url, real_documents, tmp_path):
    env = {**os.environ, "DLBENCH_WAREHOUSE_URL": warehouse_url, "DLBENCH_HOME": str(tmp_path / "home")}

    def dlbench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(DLBENCH), *args], capture_output=True, text=True, env=env, check=False)

    from dlbench.warehouse import db

    try:
        upgraded = dlbench("db", "upgrade")
        assert upgraded.returncode == 0 and f"at revision {db.head_revision()}" in upgraded.stdout, upgraded.stderr
        first = sorted(real_documents.glob("*.json"))[:1]
        loaded = dlbench("load", *map(str, first))
        assert loaded.returncode == 0 and "1 documents (1 new, 0 reloaded)" in loaded.stdout, loaded.stderr
        reloaded = dlbench("reload-archive", str(real_documents))
        assert reloaded.returncode == 0 and "(3 new, 1 reloaded)" in reloaded.stdout, reloaded.stderr
        report = dlbench("report", "--out", str(tmp_path / "r"))
        assert report.returncode == 0, report.stderr
        assert f"Run {RUN_ID}" in report.stdout and "container_on_bare_metal  throughput ↑" in report.stdout
        assert f"report: {tmp_path / 'r' / 'report.html'}" in report.stdout
        assert f"{tmp_path / 'r' / 'comparison.csv'}" in report.stdout  # --out: the files it wrote
        assert (tmp_path / "r" / "report.html").exists()
        default_out = dlbench("report", "--run-id", RUN_ID)
        assert default_out.returncode == 0
        assert (tmp_path / "home" / "reports" / RUN_ID / "report.html").exists()
        unknown = dlbench("report", "--run-id", "nope")
        assert unknown.returncode == 1 and "'nope' is not in the warehouse" in unknown.stderr
        assert dlbench("load", str(tmp_path / "missing.json")).returncode == 2
    finally:
        from dlbench.warehouse import db

        engine = db.engine_for(warehouse_url)
        db.downgrade(engine, "base")
        engine.dispose()


def test_a_report_reads_the_warehouse_not_the_files(engine, real_documents, tmp_path):
    """After loading, the archive can vanish: the report is computed from the warehouse alone."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in real_documents.glob("*.json"):
        (copy / path.name).write_text(path.read_text())
    load_documents(engine, sorted(copy.glob("*.json")))
    for path in copy.glob("*.json"):
        path.unlink()
    page = build_report(engine, RUN_ID, tmp_path / "r")
    assert json.dumps(RUN_ID)[1:-1] in page.read_text()
    assert "container_on_bare_metal" in text_table(engine, RUN_ID)


def test_the_dag_steps_load_and_report_an_archived_run(monkeypatch, tmp_path, real_documents):
    """The contract with the DAG: its load and report steps over documents in the archive layout."""
    from dlbench.pipeline import steps
    from dlbench.warehouse import archive, db

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(db.URL_ENV, raising=False)
    airflow_run_id = "scheduled__2026-11-23T00:00:00+00:00"
    safe = steps.safe_run_id(airflow_run_id)
    for path in sorted(real_documents.glob("*.json")):
        document = ResultDocument.read(path)
        document.run_id = safe
        document.write(archive.archive_path(safe, document.job_id))
    request = steps.validate({"profile": "smoke"})
    assert steps.load_run(airflow_run_id, request, "dlbench_benchmark", None)["documents"] == 4
    result = steps.report_run(airflow_run_id, None)
    assert Path(result["html"]) == tmp_path / "home" / "reports" / safe / "report.html"
    assert "container_on_bare_metal" in result["table"] and "throughput ↑" in result["table"]
    assert "profile smoke (batch" in result["table"]  # runs.profile, recorded by the load step
    engine = db.engine_for(None)
    assert engine.url.database == str(tmp_path / "home" / "warehouse.db")
    with engine.connect() as conn:
        run = conn.execute(text("SELECT dag_id, profile, provider, scheduled FROM runs")).one()
    engine.dispose()
    assert tuple(run) == ("dlbench_benchmark", "smoke", "local", True)


def test_emulated_platforms_carry_a_visible_warning(engine, tmp_path):
    """Numbers from a QEMU guest without hardware virtualization (documents labelled emulated)
    are flagged in the HTML report and the text table; other platforms are not."""
    docs = [tf_doc(p, r, 100.0 - r, 10.0 + r) for p in ("bare_metal", "virtual_machine") for r in (0, 1)]
    for doc in docs:
        if doc.environment.platform is Platform.VIRTUAL_MACHINE:
            doc.labels.update(emulated="true", accel="tcg")
    load_documents(engine, docs)
    html = build_report(engine, "r1", tmp_path / "r").read_text()
    note = html.split("Warning: emulated platforms")[1].split("</div>")[0]
    assert "<b>virtual_machine</b>" in note and "(tcg)" in note and "bare_metal" not in note
    table = text_table(engine, "r1")
    warnings = [line for line in table.splitlines() if line.startswith("WARNING:")]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: virtual_machine ran in QEMU guests without "
                                                         "hardware virtualization (tcg)")


def test_no_emulated_warning_without_emulated_documents(engine, tmp_path):
    load_documents(engine, [tf_doc(p, 0, 100.0, 10.0) for p in ("bare_metal", "virtual_machine")])
    assert "emulated" not in build_report(engine, "r1", tmp_path / "r").read_text()
    assert "WARNING" not in text_table(engine, "r1")


def test_dltools_cases_are_named_by_dataset_and_batch():
    """Table VII's batch sizes are separate cases of one network: the name must tell them apart."""
    from dlbench.reports.analysis.compare import cell_name

    params = {"dataset": "cifar10", "batch_size": 64, "data": "synthetic", "epochs": 2}
    assert cell_name("dltools", "resnet50", params) == "resnet50 cifar10 batch 64"
    assert cell_name("dltools", "resnet50", {**params, "batch_size": 32}) != cell_name("dltools", "resnet50", params)


def test_a_smoke_run_says_it_is_not_decision_grade_and_why(engine, tmp_path):
    """What a default ``make run`` writes (tests.reports.demo_run.smoke_documents): the console and
    the page say it is not decision-grade, naming the toy sizes, the repetitions and the flagged
    cell, and what to run instead with the request's real keys."""
    from dlbench.request import BenchmarkRequest
    from tests.reports.demo_run import SMOKE_RUN, run_info, smoke_documents

    load_documents(engine, smoke_documents(), run=run_info(SMOKE_RUN, "smoke", repetitions=2,
                                                           platforms=["bare_metal", "container_on_bare_metal"]))
    table = text_table(engine, SMOKE_RUN, tmp_path)
    lines = table.splitlines()
    assert lines[0] == f"Run {SMOKE_RUN}: profile smoke (batch 4-8, images 32-75 px, 5 measured steps)."
    grade = [line for line in lines if "DECISION-GRADE" in line]
    assert len(grade) == 1 and grade[0].startswith("NOT DECISION-GRADE: ")
    assert "profile smoke is toy-sized (batch 4-8, images 32-75 px, 5 measured steps)" in grade[0]
    assert "12 of 12 training comparisons have n < 3 repetitions (as few as 2)" in grade[0]
    assert "flags on 1 of 6 training cells (1 on a loaded machine)" in grade[0]
    command = grade[0].split("make run RUN_CONF='")[1].split("'")[0]
    assert json.loads(command) == {"profile": "paper", "repetitions": 5}
    BenchmarkRequest.model_validate(json.loads(command))  # the keys the request really has
    assert "on a quiet machine" in grade[0]
    # The answer: every training cell of both data kinds, each with its ×BM and verdict.
    assert "single · synthetic data · TensorFlow" in lines and "single · real data · TensorFlow" in lines
    assert sum(1 for line in lines if line.startswith("    container_on_bare_metal  throughput ↑")) == 6
    assert lines.index("single · synthetic data · TensorFlow") < lines.index(grade[0])
    loaded = [line for line in lines if "loaded 1/2" in line]
    # the flag sits on its cell's platform row: resnet50 on real data
    assert len(loaded) == 1 and lines[lines.index(loaded[0]) - 1].startswith("  resnet50 real batch 4 32px")
    page = build_report(engine, SMOKE_RUN, tmp_path / "r").read_text()
    first = page.split("<h2 id='answer'>")[0]
    assert "profile smoke (batch 4-8, images 32-75 px, 5 measured steps)" in first
    assert html_escape(grade[0]) in first  # the same judgement, word for word
    # Only single was requested: the other scenarios are not called "not run".
    assert "Not run" not in page and "distributed: not run" not in table


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_a_run_that_answers_is_decision_grade(engine, tmp_path):
    """The paper's sizes, 5 repetitions on every side, quiet machines: every training cell has a
    verdict and the line says decision-grade (console and page)."""
    from tests.reports.demo_run import DECISION_RUN, decision_documents, run_info

    load_documents(engine, decision_documents(), run=run_info(
        DECISION_RUN, "paper", repetitions=5, platforms=["bare_metal", "container_on_bare_metal", "virtual_machine"]))
    table = text_table(engine, DECISION_RUN, tmp_path)
    lines = table.splitlines()
    assert lines[0] == f"Run {DECISION_RUN}: profile paper (batch 32-512, images 224-299 px, 100 measured steps)."
    assert [line for line in lines if "DECISION-GRADE" in line] == [
        "DECISION-GRADE: real-sized profile, every training comparison resolved (equivalent within ±3%, better or "
        "worse beyond it; n >= 3 on both sides), no flags on training cells."]
    rows = [line for line in lines if line.startswith("    virtual_machine ")]
    assert len(rows) == 6  # 3 models x 2 data kinds
    for row in rows:  # 10 % slower, 0.2 % noise: worse, with an interval below 1 and n on both sides
        ratio, low, high = (float(v) for v in re.search(
            r"throughput ↑ ([\d.]+)× \[([\d.]+), ([\d.]+)\] worse n=5/5", row).groups())
        assert 0.88 < low < ratio < high < 0.92 and "⚠" not in row
    assert "  cpu       virtual_machine" in table
    page = build_report(engine, DECISION_RUN, tmp_path / "r").read_text()
    assert "<p class='grade yes' id='grade'>DECISION-GRADE: " in page


def test_a_real_sized_run_too_noisy_to_decide_says_so_and_how_many_repetitions_would(engine, tmp_path):
    """Issue 39, item 1: "decision-grade" looks at the intervals' width. The paper's sizes, n = 3,
    2.5 % noise (under the 5 % flag: nothing flagged): a container at 0.98x bare metal cannot be told
    from it nor shown the same within 3 %, so the run is not decision-grade, says how many of its
    comparisons are inconclusive, and its command asks for the repetitions that would decide."""
    from tests.reports.demo_run import DECISION_RUN, run_info, training_run

    docs = training_run(DECISION_RUN, "paper", {"bare_metal": 1.0, "container_on_bare_metal": 0.98}, 3,
                        noise=0.025, seed=9)  # a seed whose spreads stay under the 5 % CV flag
    load_documents(engine, docs, run=run_info(DECISION_RUN, "paper", repetitions=3,
                                              platforms=["bare_metal", "container_on_bare_metal"]))
    rows = statistics(samples_frame(engine, DECISION_RUN))
    training = rows[(rows["suite"] == "tf_cnn") & (rows["platform"] == "container_on_bare_metal")]
    assert set(training["verdict"]) == {"inconclusive"} and (training["repetitions_to_decide"] > 3).all()
    tested = rows[rows["p_difference"].notna()]  # Holm's family: the run's compared headline rows
    family = sum(metrics.is_headline(s, m) for s, m in zip(tested["suite"], tested["metric"], strict=True))
    assert (training["flags"] == "").all() and (training["comparisons"] == family).all()
    line = next(li for li in text_table(engine, DECISION_RUN, tmp_path).splitlines() if "DECISION-GRADE" in li)
    found = re.search(r"NOT DECISION-GRADE: (\d+) of (\d+) training comparisons are inconclusive at the ±3% "
                      r"margin \(about (\d+) repetitions per side would resolve half of them(; (\d+) sit so near "
                      r"the margin that they need more than 20)?\)\. For a decision run: make run "
                      r"RUN_CONF='\{\"profile\": \"paper\", \"repetitions\": (\d+)\}'", line)
    assert found, line
    inconclusive, compared, needed, _, near, asked = found.groups()
    needs = training["repetitions_to_decide"]
    assert int(inconclusive) == int(compared) == len(training) and int(needed) == math.ceil(needs.median())
    assert int(near or 0) == (needs > 20).sum() and int(asked) == min(max(int(needed), 5), 20)


def test_the_heading_promises_a_cost_only_when_prices_are_set(engine, tmp_path, monkeypatch):
    from tests.reports.demo_run import DECISION_RUN, decision_documents, run_info

    monkeypatch.setenv("DLBENCH_PRICES_FILE", str(tmp_path / "none.yaml"))
    monkeypatch.delenv("AIRFLOW_VAR_DLBENCH_HOST_PRICES", raising=False)
    load_documents(engine, decision_documents(), run=run_info(
        DECISION_RUN, "paper", repetitions=5, platforms=["bare_metal", "container_on_bare_metal", "virtual_machine"]))
    page = build_report(engine, DECISION_RUN, tmp_path / "a").read_text()
    assert "<h2 id='answer'>Which platform: this run's answer</h2>" in page
    assert "cost" not in page.split("<h2 id='answer'>")[1].split("<h2")[0].lower()
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_HOST_PRICES", '{"currency": "EUR", "host_hour": {"*": 3.6}}')
    page = build_report(engine, DECISION_RUN, tmp_path / "b").read_text()
    assert "<h2 id='answer'>Which platform, at what cost: this run's answer</h2>" in page
    cost = page.split("<h3 id='cost'>")[1].split("</table>")[0]
    # 3.6 EUR per host-hour = 1 EUR per 1000 s: cost per 1000 images = 1 / images per second.
    rows = statistics(samples_frame(engine, DECISION_RUN))
    bm = rows[(rows["platform"] == "bare_metal") & (rows["metric"] == "throughput") & (rows["case"].str.startswith(
        "resnet50 single synthetic"))]["mean"].iloc[0]
    assert f"<td>{1 / bm:.4g} EUR</td>" in cost
    # The text summary says the same costs, one line per row of the page's table (one outline).
    table_rows = cost.count("<tr>") - 1
    lines = text_table(engine, DECISION_RUN, tmp_path / "b").splitlines()
    head = lines.index(next(line for line in lines if line.startswith("COST per 1000 images")))
    said = [line for line in lines[head + 1:head + 1 + table_rows] if line.startswith("  ")]
    assert len(said) == table_rows > 0
    assert any(line.startswith("  ") and " resnet50 synthetic bare_metal x1: " in line
               and f": {1 / bm:.4g} EUR [" in line for line in said), said
    monkeypatch.delenv("AIRFLOW_VAR_DLBENCH_HOST_PRICES")
    assert not any(line.startswith("COST") for line in text_table(engine, DECISION_RUN).splitlines())
