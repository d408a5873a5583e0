"""Capacity planning from the warehouse: images/s per physical host and cost per 1000 images.

For one hardware type (the GPU model, else the CPU model: ``capacity_facts.hardware``), one
model and data kind, per platform and density (instances sharing a host):

    per_instance   mean single-instance throughput (scenario single), images/s
    degradation    mean measured throughput degradation (%) of a tenant when N instances
                   share the host (scenario shared, interference tenants, N = tenants); 0 for N = 1
    per_host       N x per_instance x (1 - degradation / 100)
    cost_per_1000  price per host-hour / (per_host x 3600) x 1000, in the price's currency

Densities are the measured ones (1, and every tenant count the shared scenario ran): nothing is
extrapolated. The price per host-hour comes from the Airflow Variable ``dlbench_host_prices`` or
a YAML file (``$DLBENCH_PRICES_FILE``, else ``$DLBENCH_HOME/prices.yaml``)::

    currency: EUR
    host_hour:
      NVIDIA V100: 2.48     # per hardware type
      "*": 1.10             # any other

docs/capacity.md has the same numbers as SQL over the ``capacity_facts`` view (tested equal).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import yaml
from sqlalchemy import Engine, text

from dlbench import settings
from dlbench.reports.charts import line_chart


@dataclass(frozen=True)
class CapacityRow:
    platform: str
    instances_per_host: int
    per_instance: float
    degradation_pct: float
    per_host: float
    cost_per_1000: float | None
    currency: str | None
    runs: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Prices:
    host_hour: dict[str, float]
    currency: str | None = None

    def for_hardware(self, hardware: str) -> float | None:
        price = self.host_hour.get(hardware, self.host_hour.get("*"))
        return float(price) if price is not None else None


def parse_prices(source: str | dict | None) -> Prices | None:
    """Prices from YAML/JSON text or an already parsed mapping (see the module docstring)."""
    if source is None or source == "":
        return None
    data = yaml.safe_load(source) if isinstance(source, str) else source
    if not isinstance(data, dict) or not isinstance(data.get("host_hour", {}), dict):
        raise ValueError("prices: expected {currency: ..., host_hour: {<hardware or *>: <price>}}")
    return Prices(host_hour={str(k): float(v) for k, v in (data.get("host_hour") or {}).items()},
                  currency=str(data["currency"]) if data.get("currency") else None)


def load_prices(*, airflow: bool = False) -> Prices | None:
    """The Airflow Variable ``dlbench_host_prices`` (read when ``airflow``: inside Airflow's API
    server or a task; ``AIRFLOW_VAR_DLBENCH_HOST_PRICES`` in the environment always counts), else
    the YAML file (:func:`dlbench.settings.host_prices`, :func:`dlbench.settings.prices_file`)."""
    value = settings.host_prices(airflow=airflow)
    if value:
        return parse_prices(value)
    path = settings.prices_file()
    return parse_prices(path.read_text()) if path.is_file() else None


def _filters(model: str, data: str | None, batch: str | None, runs: Sequence[str] | None) -> tuple[str, dict]:
    where = ["hardware = :hardware", "benchmark = :model"]
    params: dict[str, Any] = {"model": model}
    if data:
        where.append("data = :data")
        params["data"] = data
    if batch:
        where.append("batch = :batch")
        params["batch"] = str(batch)
    if runs:
        names = {f"run{i}": r for i, r in enumerate(runs)}
        where.append(f"run_id IN ({', '.join(':' + k for k in names)})")
        params.update(names)
    return " AND ".join(where), params


def hardware_types(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(text(
            "SELECT DISTINCT hardware FROM capacity_facts WHERE hardware IS NOT NULL ORDER BY hardware"))]


def capacity(engine: Engine, hardware: str, model: str, *, data: str | None = None, batch: str | None = None,
             runs: Sequence[str] | None = None, prices: Prices | None = None) -> list[CapacityRow]:
    """One row per platform and measured density (see the module docstring), by platform then N."""
    where, params = _filters(model, data, batch, runs)
    params["hardware"] = hardware
    sql = text(f"SELECT run_id, platform, scenario, interference, tenants, metric, value FROM capacity_facts "
               f"WHERE {where} AND metric IN ('throughput', 'degradation_throughput') "
               f"AND ((scenario = 'single' AND metric = 'throughput') OR "
               f"(scenario = 'shared' AND interference = 'tenants' AND metric = 'degradation_throughput'))")
    with engine.connect() as conn:
        rows = conn.execute(sql, params).mappings().all()
    single: dict[str, list[float]] = {}
    shared: dict[tuple[str, int], list[float]] = {}
    run_count: dict[str, set[str]] = {}
    for r in rows:
        run_count.setdefault(r["platform"], set()).add(r["run_id"])
        if r["scenario"] == "single":
            single.setdefault(r["platform"], []).append(float(r["value"]))
        else:
            shared.setdefault((r["platform"], int(r["tenants"])), []).append(float(r["value"]))
    price = prices.for_hardware(hardware) if prices else None
    currency = prices.currency if prices else None
    out = []
    for platform, values in single.items():
        per_instance = sum(values) / len(values)
        densities = [(1, 0.0)] + sorted((n, sum(v) / len(v)) for (p, n), v in shared.items() if p == platform)
        for n, deg in densities:
            per_host = n * per_instance * (1 - deg / 100)
            cost = price / (per_host * 3600) * 1000 if price is not None and per_host > 0 else None
            out.append(CapacityRow(platform, n, per_instance, deg, per_host, cost, currency,
                                   len(run_count.get(platform, ()))))
    from dlbench.reports.compare import PLATFORM_ORDER  # heavy: pandas, which the rest of this module does not need

    order = {p: i for i, p in enumerate(PLATFORM_ORDER)}
    return sorted(out, key=lambda r: (order.get(r.platform, len(order)), r.platform, r.instances_per_host))


def best(rows: Sequence[CapacityRow]) -> CapacityRow | None:
    """The platform and density with the most images/s per host."""
    return max(rows, key=lambda r: r.per_host, default=None)


def density_chart_svg(rows: Sequence[CapacityRow], width: int = 560, height: int = 300) -> str:
    """'density vs degradation': degradation (%) against instances per host, one line per platform."""
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        series.setdefault(r.platform, []).append((r.instances_per_host, r.degradation_pct))
    return line_chart(series, x_label="instances per host", y_label="throughput degradation (%)",
                      width=width, height=height, title="density vs degradation")


def as_json(rows: Sequence[CapacityRow]) -> str:
    return json.dumps([r.as_dict() for r in rows])
