"""Capacity planning from the warehouse: images/s per physical host and cost per 1000 images.

For one hardware type (the GPU model, else the CPU model: ``capacity_facts.hardware``), per
**configuration** (model, data kind, framework, batch, profile: each its own rows, never averaged
together; "all models" lists every model), **machine class** (GPU model and count, CPU count,
memory, the flavor or resource class: :mod:`dlbench.reports.analysis.machine_class`; a 2-GPU and an 8-GPU
node of one GPU model are different rows), platform and density (instances sharing a host). A
cell measured in several runs is summarised by its run means (n counts runs, ``n_of``): the
run-to-run variance is in every interval, never pooled away:

    per_instance   mean single-instance throughput (scenario single), images/s, over n repetitions
    degradation    mean measured throughput degradation (%) of a tenant when N instances
                   share the host (scenario shared, interference tenants, N = tenants); 0 for N = 1
    per_host       the tenants' measured throughput summed (``tenants_throughput_sum`` of the shared
                   cell: what the host really delivered with N tenants), where the shared scenario
                   recorded it; else N x per_instance x (1 - degradation / 100) (``per_host_from``
                   says which: ``measured`` or ``derived``)
    cost_per_1000  price per host-hour / (per_host x 3600) x 1000, in the price's currency

Each with its 95 % interval (the means: Student's t; per host: Welch t on its logarithm by the
delta method, always positive; cost: the per-host interval inverted) and the flags of the
measurements behind it (too few repetitions: no interval; noisy; loaded machine).

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
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import yaml
from sqlalchemy import Engine, text

from dlbench import settings
from dlbench.reports.analysis import machine_class, machine_load
from dlbench.reports.analysis import stats as st


@dataclass(frozen=True)
class CapacityRow:
    """One platform at one density for one configuration (model, data kind, framework, batch,
    profile): never an average over configurations. Intervals are None where they are not stated
    (fewer than :data:`~dlbench.reports.analysis.stats.MIN_REPETITIONS` repetitions: ``flags`` says so)."""

    platform: str
    instances_per_host: int
    per_instance: float
    degradation_pct: float
    per_host: float
    cost_per_1000: float | None
    currency: str | None
    runs: int
    model: str = ""
    data: str = ""
    framework: str = ""
    batch: str = ""
    profile: str = ""
    n: int = 0
    """Single-instance repetitions behind ``per_instance``."""
    degradation_n: int = 0
    """Repetitions of the shared cell at this density behind ``degradation_pct`` (0 for N = 1)."""
    per_instance_ci_low: float | None = None
    per_instance_ci_high: float | None = None
    degradation_ci_low: float | None = None
    degradation_ci_high: float | None = None
    per_host_ci_low: float | None = None
    per_host_ci_high: float | None = None
    cost_ci_low: float | None = None
    cost_ci_high: float | None = None
    flags: str = ""
    """Why not to trust the row yet: too few repetitions, noisy (CV), jobs on a loaded machine."""
    machine: str = ""
    """The kind of machine (:func:`machine_text`: CPU or GPU model and count, memory, the flavor or
    resource class): rows of unlike machines are never pooled, whatever their hardware name."""
    per_host_from: str = "derived"
    """``measured``: the shared cell's summed tenant throughput; ``derived``: N x per instance x (1 -
    degradation) (N = 1, or documents without the sum)."""
    n_of: str = "repetitions"
    """What ``n`` counts: ``repetitions`` of one run, or ``runs`` (a configuration measured in several
    runs is planned on its run means: the run-to-run variance is in the interval)."""

    @property
    def config(self) -> str:
        """``resnet50 · synthetic · TensorFlow · batch 32 · paper``: what the row is a plan for."""
        return " · ".join(p for p in (self.model, self.data, self.framework, f"batch {self.batch}" if self.batch
                                      else "", self.profile) if p)

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


SCENARIO_PARAMETERS = frozenset({"scenario", "interference", "tenants", "condition", "loop", "mode", "role",
                                  "task_index", "cluster"})
"""What a single-instance run and its shared cells differ in: left out of a row's configuration, so
the shared cells of a configuration find its single-instance throughput, and nothing else does."""


def _filters(model: str | None, data: str | None, batch: str | None, runs: Sequence[str] | None,
             platforms: Sequence[str] | None = None) -> tuple[str, dict]:
    where = ["f.hardware = :hardware"]
    params: dict[str, Any] = {}
    if model:
        where.append("f.benchmark = :model")
        params["model"] = model
    if data:
        where.append("f.data = :data")
        params["data"] = data
    if batch:
        where.append("f.batch = :batch")
        params["batch"] = str(batch)
    for column, values in (("f.run_id", runs), ("f.platform", platforms)):
        if values:
            names = {f"{column[2:]}{i}": v for i, v in enumerate(values)}
            where.append(f"{column} IN ({', '.join(':' + k for k in names)})")
            params.update(names)
    return " AND ".join(where), params


def hardware_types(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(text(
            "SELECT DISTINCT hardware FROM capacity_facts WHERE hardware IS NOT NULL ORDER BY hardware"))]


def _json(value: Any) -> dict[str, Any]:
    """A JSON column read through plain SQL: a dict on PostgreSQL (JSONB), text on SQLite."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def _config(parameters: dict[str, Any]) -> str:
    kept = {k: v for k, v in parameters.items() if k not in SCENARIO_PARAMETERS}
    return json.dumps(kept, sort_keys=True, default=str)


def machine_text(facts: dict[str, Any]) -> str:
    """``2 x NVIDIA V100 · 16 CPUs · 64 GiB · flavor g1.large``: a machine class
    (:func:`dlbench.reports.analysis.machine_class.machine_class`) as a capacity row names it."""
    parts = [f"{facts['gpu_count']} x {facts['gpu_model']}" if facts.get("gpu_model") and facts.get("gpu_count")
             else "", f"{facts['cpu_count']} CPUs" if facts.get("cpu_count") else "",
             f"{facts['memory_gib']} GiB" if facts.get("memory_gib") else "",
             f"limit {facts['cpu_limit_cores']:g} cores" if facts.get("cpu_limit_cores") else ""]
    parts += [f"{key.replace('_', ' ')} {facts[key]}" for key in ("flavor", "resource_class") if facts.get(key)]
    return " · ".join(p for p in parts if p)


@dataclass
class _Cell:
    """The measurements of one configuration x machine class x platform (x density, for a shared cell)."""

    values: list[float] = field(default_factory=list)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: set[str] = field(default_factory=set)
    by_run: dict[str, list[float]] = field(default_factory=dict)

    def add(self, run_id: str, job_id: str, value: float, labels: dict[str, Any]) -> None:
        self.values.append(value)
        self.jobs[job_id] = labels
        self.runs.add(run_id)
        self.by_run.setdefault(run_id, []).append(value)

    @property
    def samples(self) -> list[float]:
        """What the statistics read: the repetitions of one run, or each run's mean when the cell
        spans several runs (never several runs' repetitions pooled as if independent: that would
        leave the run-to-run variance out of every interval, docs/statistics.md)."""
        if len(self.by_run) > 1:
            return [st.mean(v) for v in self.by_run.values()]
        return self.values


def _mean_interval(values: Sequence[float]) -> tuple[float | None, float | None]:
    """The t interval of the mean at 95 %, None below :data:`~dlbench.reports.analysis.stats.MIN_REPETITIONS`
    (the same rule as every comparison: too few repetitions state no interval)."""
    if len(values) < st.MIN_REPETITIONS:
        return None, None
    half = st.t_quantile(1 - (1 - st.DEFAULT_CONFIDENCE) / 2, len(values) - 1) * st.std(values) / math.sqrt(len(values))
    return st.mean(values) - half, st.mean(values) + half


def _per_host_interval(n: int, single: Sequence[float], shared: Sequence[float] | None
                       ) -> tuple[float | None, float | None]:
    """The interval of ``N x per_instance x (1 - degradation / 100)``: Welch t on its logarithm by
    the delta method (the ratio intervals' method, docs/statistics.md), so it is always positive;
    the single-instance mean and the degradation are independent measurements, their variances add."""
    if len(single) < st.MIN_REPETITIONS or (shared is not None and len(shared) < st.MIN_REPETITIONS):
        return None, None
    p = st.mean(single)
    parts = [(st.std(single) ** 2 / len(single) / (p * p), len(single))]
    factor = 1.0
    if shared is not None:
        d = st.mean(shared)
        if d >= 100:
            return None, None
        factor = 1 - d / 100
        parts.append((st.std(shared) ** 2 / len(shared) / ((100 - d) ** 2), len(shared)))
    value = n * p * factor
    se2 = sum(v for v, _ in parts)
    if p <= 0 or se2 == 0:
        return (value, value) if p > 0 else (None, None)
    df = se2 ** 2 / sum(v * v / (k - 1) for v, k in parts)
    half = st.t_quantile(1 - (1 - st.DEFAULT_CONFIDENCE) / 2, df) * math.sqrt(se2)
    return value * math.exp(-half), value * math.exp(half)


def _flags(cells: Sequence[_Cell]) -> str:
    """Too few repetitions, noise (CV above the threshold) and loaded machines, over the cells a
    row is computed from (the comparison's flags, :func:`dlbench.reports.analysis.machine_load.load_flag`)."""
    found = []
    for cell in cells:
        samples, what = cell.samples, "runs" if len(cell.by_run) > 1 else "repetitions"
        if len(samples) < st.MIN_REPETITIONS:
            found.append(f"too few {what} (n={len(samples)})")
        elif st.is_noisy(st.cv(samples)):
            found.append(f"noisy: CV {st.cv(samples) * 100:.0f}%")
    jobs = {job: labels for cell in cells for job, labels in cell.jobs.items()}
    loaded = sum(1 for labels in jobs.values() if machine_load.load_flag(labels))
    if loaded:
        found.append(f"loaded machine in {loaded} of {len(jobs)} runs")
    return "; ".join(dict.fromkeys(found))


def capacity(engine: Engine, hardware: str, model: str | None = None, *, data: str | None = None,
             batch: str | None = None, runs: Sequence[str] | None = None, prices: Prices | None = None,
             platforms: Sequence[str] | None = None) -> list[CapacityRow]:
    """One row per configuration (model, data kind, framework, batch, profile: ``model`` and
    ``data`` None mean every one, each its own rows, never averaged together), platform and
    measured density (see the module docstring), by configuration, platform, then N."""
    # heavy: pandas, which the rest of this module does not need
    from dlbench.reports.analysis import answer, compare

    where, params = _filters(model, data, batch, runs, platforms)
    params["hardware"] = hardware
    sql = text(f"SELECT f.run_id, f.job_id, f.platform, f.suite, f.benchmark, f.batch, f.scenario, f.tenants, "
               f"f.metric, f.value, b.parameters, e.labels AS execution_labels, env.cpu_model, env.cpu_count, "
               f"env.memory_bytes, env.gpu_model, env.gpu_count, env.cpu_limit_cores, env.memory_limit_bytes "
               f"FROM capacity_facts f "
               f"JOIN benchmarks b ON b.suite = f.suite AND b.name = f.benchmark "
               f"AND b.parameters_hash = f.parameters_hash "
               f"JOIN executions e ON e.job_id = f.job_id JOIN environments env ON env.id = e.environment_id "
               f"WHERE {where} AND ((f.scenario = 'single' AND f.metric = 'throughput') OR "
               f"(f.scenario = 'shared' AND f.interference = 'tenants' "
               f"AND f.metric IN ('degradation_throughput', 'tenants_throughput_sum')))")
    with engine.connect() as conn:
        rows = conn.execute(sql, params).mappings().all()
    single: dict[tuple[str, str, str], _Cell] = {}
    shared: dict[tuple[str, str, str, int], _Cell] = {}
    summed: dict[tuple[str, str, str, int], _Cell] = {}
    described: dict[str, tuple[str, str, str, str, str]] = {}
    machines: dict[str, str] = {}
    for r in rows:
        parameters, labels = _json(r["parameters"]), _json(r["execution_labels"])
        config = _config(parameters)
        described.setdefault(config, (
            str(r["benchmark"]), str(parameters.get("data") or ""),
            answer.framework_of(str(r["suite"]), parameters, labels), str(r["batch"] or ""),
            str(parameters.get("profile") or "")))
        # The machine class of the host, never its name: a container's limits stay in its class
        # (a 4-core container is not the 16-core host), its hostname (its id) never does.
        facts = machine_class.machine_class("", dict(r), labels)
        machine = machine_class.class_key("", dict(r), labels)
        machines.setdefault(machine, machine_text(facts))
        if r["scenario"] == "single":
            cell = single.setdefault((config, machine, r["platform"]), _Cell())
        else:
            into = summed if r["metric"] == "tenants_throughput_sum" else shared
            cell = into.setdefault((config, machine, r["platform"], int(r["tenants"])), _Cell())
        cell.add(str(r["run_id"]), str(r["job_id"]), float(r["value"]), labels)
    price = prices.for_hardware(hardware) if prices else None
    currency = prices.currency if prices else None

    def cost(per_host: float | None) -> float | None:
        return price / (per_host * 3600) * 1000 if price is not None and per_host else None

    out = []
    for (config, machine, platform), alone in single.items():
        one = alone.samples
        per_instance = st.mean(one)
        model_name, kind, framework, batch_size, profile = described[config]
        densities: list[tuple[int, _Cell | None]] = [(1, None)] + sorted(
            ((n, cell) for (c, m, p, n), cell in shared.items() if c == config and m == machine and p == platform),
            key=lambda t: t[0])
        for n, loaded in densities:
            many = loaded.samples if loaded is not None else None
            deg = st.mean(many) if many is not None else 0.0
            total = summed.get((config, machine, platform, n)) if loaded is not None else None
            if total is not None:  # what the N tenants really delivered together
                per_host = st.mean(total.samples)
                low, high = _mean_interval(total.samples)
            else:
                per_host = n * per_instance * (1 - deg / 100)
                low, high = _per_host_interval(n, one, many)
            p_low, p_high = _mean_interval(one)
            d_low, d_high = _mean_interval(many) if many is not None else (None, None)
            cells = [alone] if loaded is None else [alone, loaded]
            spans = alone.runs | (loaded.runs if loaded is not None else set())
            out.append(CapacityRow(
                platform, n, per_instance, deg, per_host, cost(per_host) if per_host > 0 else None, currency,
                len(spans), model=model_name, data=kind,
                framework=framework, batch=batch_size, profile=profile, n=len(one),
                degradation_n=len(many) if many is not None else 0,
                per_instance_ci_low=p_low, per_instance_ci_high=p_high, degradation_ci_low=d_low,
                degradation_ci_high=d_high, per_host_ci_low=low, per_host_ci_high=high,
                cost_ci_low=cost(high), cost_ci_high=cost(low), flags=_flags(cells), machine=machines[machine],
                per_host_from="measured" if total is not None else "derived",
                n_of="runs" if len(alone.by_run) > 1 else "repetitions"))
    return sorted(out, key=lambda r: (r.model, r.data, r.framework, r.batch, r.profile,
                                      compare.platform_rank(r.platform), r.platform, r.machine, r.instances_per_host))


def configurations(rows: Sequence[CapacityRow]) -> dict[str, list[CapacityRow]]:
    """The rows per configuration (:attr:`CapacityRow.config`), in their order."""
    out: dict[str, list[CapacityRow]] = {}
    for r in rows:
        out.setdefault(r.config, []).append(r)
    return out


def best(rows: Sequence[CapacityRow]) -> CapacityRow | None:
    """The platform and density with the most images/s per host (of one configuration's rows) by
    point estimate; :func:`best_set` is what a planner should read."""
    return max(rows, key=lambda r: r.per_host, default=None)


def best_set(rows: Sequence[CapacityRow], margin: float = st.EQUIVALENCE_MARGIN) -> list[CapacityRow]:
    """The rows (platform x density, of one configuration and machine) not shown to give fewer
    images/s per host than the top one: those whose per-host interval reaches within ``margin`` of
    the top row's lower end (the top row always; a row without an interval only when its point
    does). One winner by point estimate would pick noise as often as a real difference: with
    intervals of ±5 % two platforms 2 % apart are the same answer. Each keeps its flags."""
    top = best(rows)
    if top is None:
        return []
    floor = (top.per_host_ci_low if top.per_host_ci_low is not None else top.per_host) / (1 + margin)
    return [r for r in rows if r is top or (r.per_host_ci_high if r.per_host_ci_high is not None else r.per_host)
            >= floor]


def as_json(rows: Sequence[CapacityRow]) -> str:
    return json.dumps([r.as_dict() for r in rows])
