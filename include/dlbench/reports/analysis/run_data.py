"""What a report reads from the warehouse about one run, beyond the comparison itself: the run
resolved by id (or the latest), its statistics, the machine load its harness recorded, the network
paths it measured and which platforms were emulated."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from dlbench.reports.analysis import compare, gates, machine_load
from dlbench.reports.analysis import stats as st
from dlbench.warehouse.models import Benchmark as BenchmarkRow
from dlbench.warehouse.models import Execution, Run


def resolve_run(engine: Engine, run_id: str | None) -> str | None:
    """``run_id`` if the warehouse has it (LookupError naming it otherwise); None: the latest run."""
    if run_id is None:
        return compare.latest_run_id(engine)
    with engine.connect() as conn:
        if conn.scalar(select(Run.id).where(Run.run_id == run_id)) is None:
            known = conn.scalars(select(Run.run_id).order_by(Run.started_at.desc().nulls_last()).limit(5)).all()
            raise LookupError(f"run_id {run_id!r} is not in the warehouse; latest runs: {', '.join(known) or 'none'}")
    return run_id


def run_request(engine: Engine, run_id: str) -> tuple[str | None, dict[str, Any]]:
    """(profile, validated request) the warehouse recorded for the run (``runs.profile``,
    ``runs.config``): the profile names the run's sizes, the request says what was asked for (a
    scenario or platform not asked for is not "not run"). The request is empty for documents
    loaded without one (``dlbench load``)."""
    with engine.connect() as conn:
        row = conn.execute(select(Run.profile, Run.config).where(Run.run_id == run_id)).one_or_none()
    if row is None:
        return None, {}
    return row.profile, dict(row.config or {})


def run_gates(engine: Engine, run_id: str, frame: pd.DataFrame, requested: dict[str, Any]
              ) -> list[gates.GateResult]:
    """The gates the run's archived request declared, judged on its samples (the same judgement
    as the DAG's gates task, :mod:`dlbench.pipeline.gates`), so the report and ``dlbench report``
    show each gate passed, failed or inconclusive; none for a run without gates."""
    declared = gates.archived(requested)
    if not declared:
        return []
    return gates.evaluate(declared, frame, compare.step_checks(engine, run_id))


def run_margin(requested: dict[str, Any]) -> float:
    """The equivalence margin (a fraction) the run's validated request declared, else its pinned
    profile's, else the default: a run's verdicts are read at the margin it asked for."""
    pct = requested.get("equivalence_margin_pct") or (requested.get("profile_spec") or {}).get("equivalence_margin_pct")
    return float(pct) / 100.0 if pct else st.EQUIVALENCE_MARGIN


def run_statistics(engine: Engine, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(samples frame, comparison) of a run: every number of the report, flags included, the
    verdicts at the run's own equivalence margin (:func:`run_margin`)."""
    frame = compare.samples_frame(engine, run_id)
    _, requested = run_request(engine, run_id)
    return frame, compare.statistics(frame, compare.step_checks(engine, run_id), margin=run_margin(requested))


def load_table(engine: Engine, run_id: str) -> pd.DataFrame:
    """One row per execution of the run with the machine-load labels its harness recorded, and
    the cores other processes used meanwhile (``other_cores``) and why it counts as run on a
    loaded machine (:func:`dlbench.reports.analysis.machine_load.load_flag`)."""
    query = (select(Execution.job_id, Execution.platform, Execution.repetition, Execution.labels,
                    BenchmarkRow.suite, BenchmarkRow.name)
             .join(Run, Execution.run_pk == Run.id).join(BenchmarkRow, Execution.benchmark_id == BenchmarkRow.id)
             .where(Run.run_id == run_id))
    found = []
    with engine.connect() as conn:
        for r in conn.execute(query).all():
            labels = r.labels or {}
            if not any(key in labels for key in machine_load.LOAD_LABELS):
                continue
            use = machine_load.cpu_use(labels)
            found.append({"job_id": r.job_id, "platform": r.platform, "suite": r.suite, "name": r.name,
                          "repetition": r.repetition, **{k: labels.get(k) for k in machine_load.LOAD_LABELS},
                          "other_cores": None if use is None else use.other_cores,
                          "loaded": machine_load.load_flag(labels)})
    return pd.DataFrame(found)


def network_paths(engine: Engine, run_id: str) -> dict[str, list[str]]:
    """platform -> the network paths its network-suite executions measured (label ``network_path``)."""
    query = (select(Execution.platform, Execution.labels).join(Run, Execution.run_pk == Run.id)
             .join(BenchmarkRow, Execution.benchmark_id == BenchmarkRow.id)
             .where(Run.run_id == run_id, BenchmarkRow.suite == "network"))
    found: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for platform, labels in conn.execute(query).all():
            path = (labels or {}).get("network_path")
            if path and path not in found.setdefault(platform, []):
                found[platform].append(path)
    return found


def emulated_platforms(engine: Engine, run_id: str) -> dict[str, str]:
    """platform -> the accelerator of its executions whose documents say ``emulated=true``: QEMU
    guests without hardware virtualization (TCG), 10-70x slower than a real VM."""
    query = (select(Execution.platform, Execution.labels).join(Run, Execution.run_pk == Run.id)
             .where(Run.run_id == run_id))
    found: dict[str, str] = {}
    with engine.connect() as conn:
        for platform, labels in conn.execute(query).all():
            if (labels or {}).get("emulated") == "true":
                found[platform] = (labels or {}).get("accel") or "emulated"
    return found


EMULATED_WARNING = ("ran in QEMU guests without hardware virtualization ({accel}): emulated, 10-70x slower than a VM "
                    "on KVM, so these numbers say nothing about virtualization overhead")
