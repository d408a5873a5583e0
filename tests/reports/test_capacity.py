"""Capacity planning: per-host throughput with measured degradation, cost per 1000 images, and the
SQL of docs/capacity.md giving the same numbers on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import text

from dlbench.reports import capacity
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
    assert four.per_host == pytest.approx(4 * four.per_instance * (1 - four.degradation_pct / 100))
    assert four.cost_per_1000 == pytest.approx(2.48 / (four.per_host * 3600) * 1000) and four.currency == "EUR"
    assert capacity.best(rows).instances_per_host == 4
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
        for column in ("per_instance", "degradation_pct", "per_host", "cost_per_1000"):
            assert float(r[column]) == pytest.approx(getattr(py, column), rel=1e-9), column
    assert [k.hardware for k in kinds] == ["NVIDIA A100", "NVIDIA V100"] and kinds[0].runs == 2
    # Another hardware type is its own plan; no price for it in this table but the wildcard.
    a100 = capacity.capacity(engine, "NVIDIA A100", "resnet50", prices=prices)
    assert {r.instances_per_host for r in a100} == {1, 2} and a100[0].cost_per_1000 is not None


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
    generate_history(engine, runs=2, seed=1)
    svg = capacity.density_chart_svg(capacity.capacity(engine, "NVIDIA V100", "alexnet"))
    assert svg.startswith("<svg") and "density vs degradation" in svg and svg.count('class="series"') == 4
