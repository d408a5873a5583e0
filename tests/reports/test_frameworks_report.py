"""The frameworks section: PyTorch and JAX against TensorFlow on the same platform, computed from
the warehouse with the platform comparison's statistics, checked against numbers computed here."""

from __future__ import annotations

import csv
import math
import re
import statistics as st

from scipy import stats as sps

from dlbench.reports import build_report, text_table
from dlbench.reports.analysis.compare import samples_frame
from dlbench.reports.sections.frameworks import framework_rows
from dlbench.warehouse.load import load_documents
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument

THROUGHPUT = {  # framework -> platform -> per-repetition images/s
    "tensorflow": {"bare_metal": [100.0, 102.0, 98.0, 101.0], "container_on_bare_metal": [99.0, 97.0, 100.0, 98.0]},
    "pytorch": {"bare_metal": [130.0, 128.0, 133.0, 131.0], "container_on_bare_metal": [127.0, 129.0, 126.0, 130.0]},
    "jax": {"bare_metal": [90.0, 91.0, 89.0, 90.5], "container_on_bare_metal": [88.0, 89.0, 90.0, 87.5]},
}


def doc(framework: str, platform: str, rep: int, throughput: float) -> ResultDocument:
    parameters = {"data": "synthetic", "profile": "smoke", "batch_size_per_device": 4, "image_size": 32}
    if framework != "tensorflow":  # as tf-cnn writes it: absent means tensorflow
        parameters["framework"] = framework
    d = ResultDocument(run_id="fw1", repetition=rep, labels={"framework": framework, "precision": "fp32"},
                       benchmark=Benchmark(suite="tf_cnn", name="resnet50", parameters=parameters),
                       environment=Environment(hostname="h", platform=Platform(platform)))
    d.add("throughput", throughput, "images/s", model="resnet50", data="synthetic", batch_size=4)
    d.add("elapsed_time", 1000.0 / throughput, "s", scope="process_start_to_end")
    return d


def welch_log_ratio(values: list[float], base: list[float]) -> tuple[float, float, float]:
    """The interval computed here independently: Welch t on log(mean ratio) by the delta method."""
    md, mh = st.fmean(values), st.fmean(base)
    vd = st.variance(values) / (len(values) * md * md)
    vh = st.variance(base) / (len(base) * mh * mh)
    df = (vd + vh) ** 2 / (vd ** 2 / (len(values) - 1) + vh ** 2 / (len(base) - 1))
    half = sps.t.ppf(0.975, df) * math.sqrt(vd + vh)
    return md / mh, md / mh * math.exp(-half), md / mh * math.exp(half)


def test_frameworks_compared_on_the_same_platform(engine, tmp_path):
    docs = [doc(fw, platform, rep, value) for fw, by_platform in THROUGHPUT.items()
            for platform, values in by_platform.items() for rep, value in enumerate(values)]
    load_documents(engine, docs)
    rows = framework_rows(samples_frame(engine, "fw1"))
    throughput = [r for r in rows if r.metric == "throughput"]
    assert {(r.platform, r.framework, r.baseline) for r in throughput} == {
        (p, fw, "tensorflow") for p in ("bare_metal", "container_on_bare_metal") for fw in ("pytorch", "jax")}
    for row in throughput:
        ratio, low, high = welch_log_ratio(THROUGHPUT[row.framework][row.platform],
                                           THROUGHPUT["tensorflow"][row.platform])
        c = row.comparison
        assert math.isclose(c.ratio, ratio, rel_tol=1e-9) and math.isclose(c.ratio_low, low, rel_tol=1e-6)
        assert math.isclose(c.ratio_high, high, rel_tol=1e-6) and (c.n, c.baseline_n) == (4, 4)
        assert c.verdict.value == ("better" if row.framework == "pytorch" else "worse")
    elapsed = [r for r in rows if r.metric == "elapsed_time" and r.framework == "pytorch"]
    assert elapsed and all(r.comparison.verdict.value == "better" for r in elapsed)  # less time is better

    table = text_table(engine, "fw1", tmp_path)
    lines = table.splitlines()
    start = lines.index("FRAMEWORKS: each against TensorFlow on the same platform and machine (× TensorFlow)")
    section = lines[start:start + 6]
    assert section[1] == "  single · resnet50 synthetic batch 4 32px"
    assert [line.split()[:2] for line in section[2:]] == [
        ["bare_metal", "PyTorch"], ["bare_metal", "JAX"], ["container_on_bare_metal", "PyTorch"],
        ["container_on_bare_metal", "JAX"]]
    assert re.search(r"JAX +throughput ↑ 0\.\d+× \[[\d.]+, [\d.]+\] worse n=4/4   elapsed time ↓ 1\.\d+× "
                     r"\[[\d.]+, [\d.]+\] worse n=4/4$", section[3]), section[3]
    # the platform answer groups by framework, the study's first: platforms compared within each
    assert [line for line in lines if line.startswith("single · ")] == [
        "single · synthetic data · TensorFlow", "single · synthetic data · PyTorch", "single · synthetic data · JAX"]
    page = build_report(engine, "fw1", tmp_path / "r").read_text()
    assert "<h2 id='frameworks'>Frameworks on the same platform: each against TensorFlow</h2>" in page
    with (tmp_path / "r" / "frameworks.csv").open() as f:
        written = list(csv.DictReader(f))
    assert len(written) == len(rows) == 2 * 2 * 2  # platforms x frameworks x metrics


def test_one_framework_has_no_frameworks_section(engine, tmp_path):
    load_documents(engine, [doc("tensorflow", p, rep, v) for p, values in THROUGHPUT["tensorflow"].items()
                            for rep, v in enumerate(values)])
    assert framework_rows(samples_frame(engine, "fw1")) == []
    assert "FRAMEWORKS:" not in text_table(engine, "fw1", tmp_path)


def test_the_decision_run_keeps_the_frameworks_asked_about():
    from dlbench.reports.analysis.answer import decision_command

    assert decision_command("smoke", True) == """make run RUN_CONF='{"profile": "paper", "repetitions": 5}'"""
    assert decision_command("smoke", True, ["tensorflow"]) == decision_command("smoke", True)
    assert decision_command("smoke", True, ["tensorflow", "pytorch"]) == (
        """make run RUN_CONF='{"profile": "paper", "repetitions": 5, "frameworks": ["tensorflow", "pytorch"]}'""")
