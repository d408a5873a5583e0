"""Capacity planning: per-host throughput with measured degradation, cost per 1000 images, and the
SQL of docs/capacity.md giving the same numbers on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from dlbench.reports.analysis import capacity
from dlbench.reports.rendering.charts import density_chart_svg
from tools.ui_history import generate_history

DOCS = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"


def documented_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOCS.read_text(), flags=re.S)


def test_capacity_and_the_documented_sql_agree(engine):
    generate_history(engine, runs=4, tenants=(2, 4), seed=7)
    generate_history(engine, runs=2, tenants=(2,), hardware="NVIDIA A100", seed=8, prefix="manual__",
                     models=("resnet50",))
    prices = capacity.Prices({"NVIDIA V100": 2.48, "*": 9.0}, "EUR")
    rows = capacity.capacity(engine, "NVIDIA V100", "resnet50", data="synthetic", prices=prices)
    by = {(r.platform, r.instances_per_host): r for r in rows}
    assert set(by) == {(p, n) for p in ("bare_metal", "container_on_bare_metal", "virtual_machine",
                                        "container_on_vm") for n in (1, 2, 4)}
    one, four = by[("virtual_machine", 1)], by[("virtual_machine", 4)]
    assert one.degradation_pct == 0 and one.per_host == one.per_instance
    assert 20 < four.degradation_pct < 34  # generated: 9 % per extra tenant
    # Per host with 4 tenants: what they delivered together (measured), close to the derived figure.
    assert four.per_host_from == "measured" and one.per_host_from == "derived"
    assert four.per_host == pytest.approx(4 * four.per_instance * (1 - four.degradation_pct / 100), rel=0.05)
    assert four.cost_per_1000 == pytest.approx(2.48 / (four.per_host * 3600) * 1000) and four.currency == "EUR"
    assert capacity.best(rows).instances_per_host == 4
    # Four runs of the same machine class: n counts runs (run means), one machine per row.
    assert {(r.n, r.n_of) for r in rows} == {(4, "runs")} and len({r.machine for r in rows}) == 1
    assert "NVIDIA V100" in rows[0].machine
    top = capacity.best(rows)
    best = capacity.best_set(rows)
    assert top in best and all(r.per_host_ci_high is None or r.per_host_ci_high >= (top.per_host_ci_low or 0) / 1.03
                               for r in best)
    assert all(r not in best for r in rows if r.per_host_ci_high is not None and top.per_host_ci_low is not None
               and r.per_host_ci_high < top.per_host_ci_low / 1.03)
    assert capacity.hardware_types(engine) == ["NVIDIA A100", "NVIDIA V100"]

    queries = documented_queries()
    assert len(queries) == 2
    with engine.connect() as conn:
        sql_rows = conn.execute(text(queries[0]), {"hardware": "NVIDIA V100", "model": "resnet50",
                                                   "data": "synthetic", "price": 2.48}).mappings().all()
        kinds = conn.execute(text(queries[1])).all()
    assert len(sql_rows) == len(rows)
    for r in sql_rows:
        py = by[(r["platform"], r["instances_per_host"])]
        assert int(r["n"]) == py.n and r["batch"] == py.batch
        for column in ("per_instance", "degradation_pct", "per_host", "cost_per_1000"):
            assert float(r[column]) == pytest.approx(getattr(py, column), rel=1e-9), column
    assert [k.hardware for k in kinds] == ["NVIDIA A100", "NVIDIA V100"] and kinds[0].runs == 2
    # Another hardware type is its own plan; no price for it in this table but the wildcard.
    a100 = capacity.capacity(engine, "NVIDIA A100", "resnet50", prices=prices)
    assert {r.instances_per_host for r in a100} == {1, 2} and a100[0].cost_per_1000 is not None


def test_intervals_n_and_flags_checked_independently(engine):
    """The intervals against SciPy's t distribution (not dlbench's), and too few repetitions."""
    from scipy import stats as scipy_stats

    runs = generate_history(engine, runs=1, repetitions=6, tenants=(4,), seed=13, models=("resnet50",))
    rows = capacity.capacity(engine, "NVIDIA V100", "resnet50", data="synthetic", runs=runs,
                             prices=capacity.Prices({"*": 2.0}, "EUR"))
    by = {(r.platform, r.instances_per_host): r for r in rows}
    with engine.connect() as conn:
        def values(scenario: str, metric: str, platform: str) -> list[float]:
            return [float(v) for v in conn.scalars(text(
                "SELECT value FROM capacity_facts WHERE benchmark = 'resnet50' AND data = 'synthetic' "
                "AND scenario = :s AND metric = :m AND platform = :p"), {"s": scenario, "m": metric, "p": platform})]
        alone = values("single", "throughput", "virtual_machine")
        degraded = values("shared", "degradation_throughput", "virtual_machine")
        totals = values("shared", "tenants_throughput_sum", "virtual_machine")
    one, four = by[("virtual_machine", 1)], by[("virtual_machine", 4)]
    assert one.n == len(alone) == 6 and four.degradation_n == len(degraded) == 6 and one.runs == 1
    assert one.n_of == "repetitions"  # one run: its repetitions (several runs: their means, the test above)
    low, high = scipy_stats.t.interval(0.95, len(alone) - 1, loc=np.mean(alone), scale=scipy_stats.sem(alone))
    assert (one.per_instance_ci_low, one.per_instance_ci_high) == (pytest.approx(low), pytest.approx(high))
    low, high = scipy_stats.t.interval(0.95, len(degraded) - 1, loc=np.mean(degraded), scale=scipy_stats.sem(degraded))
    assert (four.degradation_ci_low, four.degradation_ci_high) == (pytest.approx(low), pytest.approx(high))
    # Per host, measured: the t interval of the tenants' summed throughput.
    low, high = scipy_stats.t.interval(0.95, len(totals) - 1, loc=np.mean(totals), scale=scipy_stats.sem(totals))
    assert four.per_host_from == "measured" and four.per_host == pytest.approx(np.mean(totals))
    assert (four.per_host_ci_low, four.per_host_ci_high) == (pytest.approx(low), pytest.approx(high))
    # Per host, derived (documents without the sum): log(4 x P x (1 - D/100)); the two relative
    # variances add, Welch-Satterthwaite df.
    a = np.var(alone, ddof=1) / len(alone) / np.mean(alone) ** 2
    b = np.var(degraded, ddof=1) / len(degraded) / (100 - np.mean(degraded)) ** 2
    df = (a + b) ** 2 / (a * a / (len(alone) - 1) + b * b / (len(degraded) - 1))
    half = scipy_stats.t.ppf(0.975, df) * np.sqrt(a + b)
    derived = 4 * np.mean(alone) * (1 - np.mean(degraded) / 100)
    d_low, d_high = capacity._per_host_interval(4, alone, degraded)
    assert (d_low, d_high) == (pytest.approx(derived * np.exp(-half)), pytest.approx(derived * np.exp(half)))
    assert 0 < four.per_host_ci_low < four.per_host < four.per_host_ci_high
    assert four.cost_ci_low == pytest.approx(2.0 / (four.per_host_ci_high * 3600) * 1000)
    assert four.cost_ci_low < four.cost_per_1000 < four.cost_ci_high
    assert four.flags == "" and one.config == "resnet50 · synthetic · TensorFlow · batch 32 · generated"
    # One run of two repetitions: no interval at all, and the row says why.
    few = generate_history(engine, runs=1, repetitions=2, seed=6, models=("alexnet",), prefix="manual__")
    row = capacity.capacity(engine, "NVIDIA V100", "alexnet", data="real", runs=few)[0]
    assert row.n == 2 and row.per_instance_ci_low is None and row.per_host_ci_high is None
    assert row.flags == "too few repetitions (n=2)"


def test_prices_from_yaml_file_and_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("AIRFLOW_VAR_DLBENCH_HOST_PRICES", raising=False)
    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path))
    assert capacity.load_prices() is None
    (tmp_path / "prices.yaml").write_text("currency: CHF\nhost_hour:\n  NVIDIA V100: 3.5\n")
    prices = capacity.load_prices()
    assert prices.currency == "CHF" and prices.for_hardware("NVIDIA V100") == 3.5
    assert prices.for_hardware("other") is None
    monkeypatch.setenv("AIRFLOW_VAR_DLBENCH_HOST_PRICES", '{"currency": "USD", "host_hour": {"*": 1}}')
    assert capacity.load_prices().for_hardware("other") == 1.0
    with pytest.raises(ValueError):
        capacity.parse_prices("host_hour: [1, 2]")


def test_density_chart_is_inline_svg(engine):
    from dlbench.reports.rendering.palette import platform_color

    generate_history(engine, runs=3, seed=1)  # three runs: intervals on their run means
    rows = capacity.capacity(engine, "NVIDIA V100", "alexnet", data="real")
    svg = density_chart_svg(rows)
    assert svg.startswith("<svg") and "density vs degradation" in svg and svg.count('class="series"') == 4
    for platform in ("bare_metal", "virtual_machine"):
        assert f'data-series="{platform}" fill="none" stroke="{platform_color(platform)}"' in svg
    assert svg.count('class="whisker"') == 4 * 2  # the degradation's interval at 2 and 4 tenants
    # Without a data kind, each kind is its own configuration: never one averaged line.
    both = capacity.configurations(capacity.capacity(engine, "NVIDIA V100", "alexnet"))
    assert [c.split(" · ")[1] for c in both] == ["real", "synthetic"]
