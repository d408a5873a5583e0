"""The report of issue 24's two suites, read from a real SQLite warehouse: Fathom's eight workloads
(train, infer) and the transformer (train, generate, the shared scenario) on two platforms with
three repetitions, as their jobs write them (docs: the agreed document contract). Checks the cases'
names, the metrics' directions, the answer's grouping (Fathom under TensorFlow, the transformer
under PyTorch), the cross-platform comparison against numbers computed here, and the Fathom figure
(one panel per workload, its bars the table's means, read back from what matplotlib drew)."""

from __future__ import annotations

import csv
import json
import math
import re
import statistics

import pytest
from PIL import Image

from dlbench.reports import build_report, text_table
from dlbench.reports.analysis import compare, metrics
from dlbench.reports.analysis.run_data import run_statistics
from dlbench.reports.sections import model_figures
from dlbench.warehouse import db
from dlbench.warehouse.load import RunInfo, load_documents
from dlbench.workloads.profiles import FathomModel
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument

RUN = "wl24"
PLATFORMS = {"bare_metal": 1.0, "container_on_bare_metal": 0.90}
"""Each platform's speed: the container is 10 % slower on every case, so every comparison is "worse"."""
REPS = (1.00, 1.01, 0.99)
"""Per repetition, a factor on the rate: a spread of 1 % (the verdicts are clear)."""

FATHOM = {  # workload -> (batch, unit, training rate at bare metal) (sizes of Fathom's defaults)
    "seq2seq": (128, "sentences/s", 40.0), "memnet": (32, "questions/s", 900.0), "speech": (32, "utterances/s", 25.0),
    "autoenc": (100, "images/s", 5000.0), "residual": (16, "images/s", 30.0), "vgg": (32, "images/s", 12.0),
    "alexnet": (64, "images/s", 120.0), "deepq": (32, "frames/s", 700.0)}
INFER_SPEED = 3.0
"""Inference (forward only) is three times training's rate."""

GPT = {"framework": "pytorch", "precision": "bf16", "batch_size": 8, "context": 1024, "layers": 12, "width": 768,
       "data": "synthetic", "profile": "smoke"}


def _env(platform: str) -> Environment:
    return Environment(hostname=f"node-{platform[:4]}", platform=Platform(platform), cpu_count=16)


def _labels(task: str, framework: str, **more: str) -> dict[str, str]:
    return {"task": task, "data": "synthetic", "data_source": "generated", "device": "cpu", "framework": framework,
            "framework_version": "2.17.1" if framework == "tensorflow" else "2.5.1", "host_cpus": "16",
            "host_steal_share": "0.0", "host_other_cpu_share": "0.01", **more}


def _steps(doc: ResultDocument, batch: int, rate: float, unit: str) -> None:
    """The samples every job writes: throughput, step-time statistics, the window, per-step times."""
    step = batch / rate
    doc.add("throughput", rate, unit)
    doc.add("step_time_mean", step, "s")
    doc.add("step_time_std", step * 0.01, "s")
    doc.add("step_time_p95", step * 1.02, "s")
    doc.add("measured_time", step * 5, "s")
    doc.add("setup_time", 1.5, "s")
    doc.add("measured_window_start", 1_700_000_000.0, "s")
    doc.add("measured_window_end", 1_700_000_000.0 + step * 5, "s")
    for i in range(5):
        doc.add("step_time", step, "s", step=i, warmup=False)


def fathom_documents(platforms: dict[str, float] = PLATFORMS) -> list[ResultDocument]:
    docs = []
    for rep, factor in enumerate(REPS):
        for platform, speed in platforms.items():
            for model, (batch, unit, rate) in FATHOM.items():
                for task in ("train", "infer"):
                    d = ResultDocument(
                        job_id=f"f-{platform}-{model}-{task}-{rep}", run_id=RUN, repetition=rep,
                        labels=_labels(task, "tensorflow", model_parameters="1000"), environment=_env(platform),
                        benchmark=Benchmark(suite="fathom", name=model, parameters={
                            "profile": "smoke", "task": task, "data": "auto", "dataset": "generated",
                            "batch_size": batch, "warmup_steps": 2, "measured_steps": 5}))
                    _steps(d, batch, rate * speed * factor * (INFER_SPEED if task == "infer" else 1.0), unit)
                    docs.append(d)
    return docs


def transformer_documents(platforms: dict[str, float] = PLATFORMS) -> list[ResultDocument]:
    docs = []
    for rep, factor in enumerate(REPS):
        for platform, speed in platforms.items():
            train = ResultDocument(job_id=f"t-{platform}-train-{rep}", run_id=RUN, repetition=rep,
                                   labels=_labels("train", "pytorch", precision="bf16"), environment=_env(platform),
                                   benchmark=Benchmark(suite="transformer", name="gpt",
                                                       parameters={**GPT, "task": "train"}))
            _steps(train, 8 * 1024, 2000.0 * speed * factor, "tokens/s")
            train.add("model_tflops", 1.5 * speed * factor, "TFLOPS")
            train.add("peak_gemm", 3.0, "TFLOPS", source="cpu dgemm")
            train.add("mfu", 0.5 * speed * factor, "fraction")
            generate = ResultDocument(job_id=f"t-{platform}-gen-{rep}", run_id=RUN, repetition=rep,
                                      labels=_labels("generate", "pytorch", precision="bf16"),
                                      environment=_env(platform),
                                      benchmark=Benchmark(suite="transformer", name="gpt", parameters={
                                          **GPT, "task": "generate", "prompt_length": 128, "new_tokens": 64}))
            _steps(generate, 8, 300.0 * speed * factor, "tokens/s")
            generate.add("time_to_first_token", 0.2 / speed / factor, "s")
            generate.add("inter_token_latency", 0.027 / speed / factor, "s")
            shared = ResultDocument(job_id=f"t-{platform}-shared-{rep}", run_id=RUN, repetition=rep,
                                    labels={"role": "aggregate", "interference": "background"},
                                    environment=_env(platform),
                                    benchmark=Benchmark(suite="transformer", name="gpt", parameters={
                                        **GPT, "task": "train", "scenario": "shared", "interference": "background"}))
            alone, loaded = 2000.0 * speed * factor, 1600.0 * speed * speed * factor
            shared.add("throughput", loaded, "tokens/s")
            shared.add("throughput_alone", alone, "tokens/s")
            shared.add("degradation_throughput", (alone - loaded) / alone * 100, "%")
            docs += [train, generate, shared]
    return docs


@pytest.fixture
def engine(tmp_path):
    """A migrated SQLite warehouse (the embedded default): what ``make run`` reports from."""
    engine = db.upgrade(db.engine_for(f"sqlite:///{tmp_path / 'warehouse.db'}"))
    yield engine
    engine.dispose()


def test_new_metrics_have_their_directions_and_headlines():
    assert metrics.direction("time_to_first_token", "s") is metrics.LOWER
    assert metrics.direction("inter_token_latency", "s") is metrics.LOWER
    assert metrics.direction("mfu", "fraction") is metrics.HIGHER
    assert metrics.direction("model_tflops", "TFLOPS") is metrics.HIGHER
    assert metrics.direction("peak_gemm", "TFLOPS") is metrics.HIGHER and metrics.is_diagnostic("peak_gemm")
    assert metrics.HEADLINE["fathom"] == ["throughput", "step_time_mean"]
    assert metrics.HEADLINE["transformer"][:4] == ["throughput", "mfu", "time_to_first_token", "inter_token_latency"]
    assert metrics.is_headline("transformer", "degradation_throughput")
    assert not metrics.is_headline("transformer", "peak_gemm") and not metrics.is_headline("fathom", "setup_time")


def test_both_suites_are_answered_case_by_case(engine, tmp_path):
    load_documents(engine, fathom_documents() + transformer_documents(), run=RunInfo(
        run_id=RUN, dag_id="dlbench_benchmark", profile="smoke", provider="local",
        config={"profile": "smoke", "repetitions": 3, "platforms": list(PLATFORMS),
                "suites": ["fathom", "transformer"], "scenarios": ["single", "shared"]}))
    frame, stats = run_statistics(engine, RUN)
    cases = set(stats["case"])
    # Named by workload, task, the data it ran on (the request said "auto"; the job says what it used), batch.
    assert {f"{m} {t} synthetic batch {b}" for m, (b, _, _) in FATHOM.items() for t in ("train", "infer")} <= cases
    assert {"gpt train bf16 batch 8 ctx 1024", "gpt generate bf16 batch 8 ctx 1024 prompt 128 +64 tokens",
            "gpt shared with background train bf16 batch 8 ctx 1024"} <= cases

    # The comparison against bare metal, computed here: ×BM = mean / bare metal's mean, n = 3, worse (10 % slower).
    for model, (batch, unit, rate) in FATHOM.items():
        row = stats[(stats["case"] == f"{model} infer synthetic batch {batch}") & (stats["metric"] == "throughput")
                    & (stats["platform"] == "container_on_bare_metal")].iloc[0]
        base = statistics.fmean(rate * INFER_SPEED * f for f in REPS)
        assert math.isclose(row["baseline"], base, rel_tol=1e-9) and row["unit"] == unit
        assert math.isclose(row["normalized"], 0.90, rel_tol=1e-9)
        assert (row["n"], row["baseline_n"], row["verdict"]) == (3, 3, "worse")
        assert row["normalized_ci_low"] < 0.90 < row["normalized_ci_high"] < 1.0
    ttft = stats[(stats["metric"] == "time_to_first_token") & (stats["platform"] == "container_on_bare_metal")].iloc[0]
    assert not ttft["higher_is_better"] and ttft["verdict"] == "worse" and ttft["normalized"] > 1.0

    table = text_table(engine, RUN, tmp_path)
    lines = table.splitlines()
    start = lines.index("WORKLOADS: each case against bare metal (headline metrics)")
    titles = [line for line in lines[start:] if " · " in line and not line.startswith(" ")]
    assert titles == ["fathom · single · synthetic data · TensorFlow",
                      "transformer · single · synthetic data · PyTorch",
                      "transformer · shared · synthetic data · PyTorch"]
    # Fathom's workloads in Fathom's order, training before inference.
    fathom = [line.split(" (bare metal")[0].strip() for line in lines[start + 2:]
              if line.startswith("  ") and not line.startswith("   ")][:16]
    assert fathom == [f"{m} {t} synthetic batch {FATHOM[m][0]}" for m in FATHOM for t in ("train", "infer")]
    vgg = lines.index("  vgg infer synthetic batch 32 (bare metal: 36 images/s, 0.8889 s; n=3)")
    assert re.fullmatch(r" {4}container_on_bare_metal +throughput ↑ 0\.900× \[0\.\d+, 0\.\d+\] worse n=3/3 +"
                        r"step time ↓ 1\.11× \[1\.\d+, 1\.\d+\] worse n=3/3", lines[vgg + 1]), lines[vgg + 1]
    generate = next(line for line in lines[lines.index("  gpt generate bf16 batch 8 ctx 1024 prompt 128 +64 tokens "
                                                       "(bare metal: 300 tokens/s, 0.2 s, 0.027 s; n=3)") + 1:])
    assert "time to first token ↓ 1.11×" in generate and "inter-token latency ↓ 1.11×" in generate
    assert "MFU" not in generate  # generation has no MFU
    shared = lines[lines.index("transformer · shared · synthetic data · PyTorch") + 2]
    assert re.search(r"throughput degradation ↓ 28 % n=3$", shared), shared  # a %, never × bare metal
    assert "Micro-benchmarks" not in table  # the workloads are answered, not summarised as micro-benchmarks
    grade = next(line for line in lines if "DECISION-GRADE" in line)
    assert grade.startswith("NOT DECISION-GRADE: profile smoke is toy-sized (5 measured steps)")
    # the decision run repeats the opt-in suites the run asked about (the default suites would not)
    assert """make run RUN_CONF='{"profile": "paper", "repetitions": 5, "suites": ["fathom", "transformer"]}'""" \
        in grade

    page = build_report(engine, RUN, tmp_path / "r").read_text()
    assert "<a href='#workloads'>Workloads</a>" in page and "<h2 id='workloads'>" in page
    assert "<h3>fathom · Single instance · synthetic data · TensorFlow</h3>" in page
    assert "<h3>transformer · Single instance · synthetic data · PyTorch</h3>" in page
    for model, (batch, _, _) in FATHOM.items():
        assert f"<td>{model} train synthetic batch {batch}</td>" in page
    assert "<td>gpt generate bf16 batch 8 ctx 1024 prompt 128 +64 tokens</td>" in page
    assert "time to first token ×BM ↓" in page and "throughput degradation % ↓" in page
    assert "id='micro'" not in page and "<img alt='fathom figure'" in page
    with (tmp_path / "r" / "comparison.csv").open() as f:
        written = {(r["case"], r["metric"], r["platform"]) for r in csv.DictReader(f)}
    assert ("seq2seq train synthetic batch 128", "throughput", "container_on_bare_metal") in written


def test_the_fathom_figure_draws_each_workload_native_vs_each_platform(engine, tmp_path):
    load_documents(engine, fathom_documents() + transformer_documents())
    frame, stats = run_statistics(engine, RUN)
    figure = model_figures.figure_data(stats, frame, "fathom")
    assert figure is not None and figure.platforms == list(PLATFORMS)
    assert [p.title for p in figure.panels] == [m.value for m in FathomModel]  # Fathom's order
    for panel in figure.panels:
        batch, unit, _ = FATHOM[panel.title]
        assert panel.unit == unit
        assert panel.groups == [f"train synthetic batch {batch}", f"infer synthetic batch {batch}"]
        for bar in panel.bars:
            row = stats[(stats["case"] == f"{panel.title} {bar.group}") & (stats["metric"] == "throughput")
                        & (stats["platform"] == bar.platform)].iloc[0]
            assert bar.mean == row["mean"] and bar.n == row["n"] == 3
            if bar.platform == compare.BASELINE:
                assert not bar.has_interval
            else:  # the comparison's ×BM interval, stated in the unit
                assert math.isclose(bar.low, row["baseline"] * row["normalized_ci_low"], rel_tol=1e-12)
                assert math.isclose(bar.high, row["baseline"] * row["normalized_ci_high"], rel_tol=1e-12)
                assert panel.ylim[0] <= bar.low < bar.high < panel.ylim[1]

    build_report(engine, RUN, tmp_path / "r")
    png = Image.open(tmp_path / "r" / "fathom.png")
    drawn = json.loads(png.info["Description"])  # read back from matplotlib's artists (model_figures.drawn_record)
    assert [p["title"] for p in drawn] == [m.value for m in FathomModel]
    for panel, shown in zip(figure.panels, drawn, strict=True):
        assert list(shown["bars"]) == list(PLATFORMS)
        for platform, heights in shown["bars"].items():
            means = [next(b.mean for b in panel.bars if b.platform == platform and b.group == g) for g in panel.groups]
            assert heights == pytest.approx(means, rel=1e-12)
    assert (tmp_path / "r" / "transformer.png").is_file()
    with (tmp_path / "r" / model_figures.CSV).open() as f:
        bars = list(csv.DictReader(f))
    assert len(bars) == 8 * 2 * 2 + 3 * 2  # fathom: workloads x tasks x platforms; transformer: 3 cases x platforms


def test_a_run_without_fathom_has_no_fathom_section(engine, tmp_path):
    load_documents(engine, transformer_documents())
    table = text_table(engine, RUN, tmp_path)
    assert "fathom · " not in table and "transformer · single · synthetic data · PyTorch" in table
    page = build_report(engine, RUN, tmp_path / "r").read_text()
    assert "fathom" not in page.lower() and not (tmp_path / "r" / "fathom.png").exists()
    assert "<img alt='transformer figure'" in page
