"""One document per scenario cell, computed from its roles' documents (pure: documents in, document out).

A distributed or shared-resource job is several workloads; each writes its own document (a *role*
document, ``labels["role"]``: ps, worker, network, alone, foreground, background, tenant). The
cell's document (``labels["role"] = "aggregate"``, the cell's ``job_id``) is what the report
compares across platforms:

- distributed: cluster throughput = the sum of the workers' images/s (they step in lock-step
  over the same measured window: the window overlap is recorded), elapsed time = first launch to
  last exit on the controller's clock, each worker's figures kept, and the network between the
  worker and parameter-server instances measured with the job;
- shared (background): degradation % of elapsed time and of throughput against the alone
  baseline of the same job, the background's throughput, how long it overlapped the foreground's
  measured window, and study 002's counters of every role;
- shared (tenants): the same degradation for the mean tenant, and the tenants' sum.

Degradation follows the core study: elapsed ``(with - alone) / alone x 100`` (longer is worse),
throughput ``(alone - with) / alone x 100`` (fewer images/s is worse); positive = degraded.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from dlbench.execution.base import failed_document
from dlbench.jobs import Job
from dlbench.suites import spec_of
from dlbench.suites.spec import alone_metric, degradation_metric
from dlbench.workloads.result import Benchmark, ResultDocument, Status

ROLE_LABEL = "role"
AGGREGATE = "aggregate"

COUNTERS = ("minor_page_faults", "major_page_faults", "voluntary_context_switches", "involuntary_context_switches",
            "cgroup_page_faults", "cgroup_major_page_faults", "writeback_dirtied", "writeback_written",
            "cgroup_block_written")
"""Study 002's contention counters, copied per role into the shared scenario's cell document."""


@dataclass(frozen=True)
class RoleOutcome:
    """A role's document and when it ran on the controller's monotonic clock."""

    role: str
    index: int
    doc: ResultDocument
    launched: float
    ended: float


def is_role_document(doc_labels: dict) -> bool:
    """A role's own document (counted inside its cell, never compared on its own)."""
    role = doc_labels.get(ROLE_LABEL)
    return role is not None and role != AGGREGATE


def value(doc: ResultDocument, metric: str, **labels: object) -> float | None:
    for sample in doc.samples:
        if sample.metric == metric and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


def unit(doc: ResultDocument, metric: str, default: str) -> str:
    """The unit of ``metric``'s first sample in ``doc`` (images/s for a CNN, tokens/s for the
    transformer), else ``default``: a cell's figures keep their roles' units."""
    return next((s.unit for s in doc.samples if s.metric == metric), default)


def window(doc: ResultDocument) -> tuple[float, float] | None:
    """The measured steps' window on CLOCK_REALTIME (epoch seconds), when the workload wrote it."""
    start, end = value(doc, "measured_window_start"), value(doc, "measured_window_end")
    return (start, end) if start is not None and end is not None and end >= start else None


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> float:
    """Seconds two windows have in common (0 when either is unknown or they are disjoint)."""
    if a is None or b is None:
        return 0.0
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def common_fraction(windows: Sequence[tuple[float, float] | None]) -> float:
    """The share of the mean window that every window covers (1.0 = perfectly simultaneous)."""
    known = [w for w in windows if w is not None]
    if not known or len(known) < len(windows):
        return 0.0
    common = max(0.0, min(w[1] for w in known) - max(w[0] for w in known))
    mean = statistics.fmean(w[1] - w[0] for w in known)
    return common / mean if mean > 0 else 0.0


def degradation(alone: float, loaded: float, *, higher_is_better: bool) -> float:
    """Percent worse than alone: positive = degraded (the study's figure 10)."""
    if alone <= 0:
        raise ValueError("the alone baseline must be positive")
    return (alone - loaded) / alone * 100 if higher_is_better else (loaded - alone) / alone * 100


def _cell_document(cell: Job, template: ResultDocument | None, roles: Sequence[RoleOutcome]) -> ResultDocument:
    """The cell's document: the template role's benchmark and environment, status ok only when
    every role is ok (the first failure named)."""
    base = template if template is not None else failed_document(cell, "no role document")
    doc = ResultDocument(
        job_id=cell.job_id, run_id=cell.run_id, repetition=cell.repetition,
        benchmark=Benchmark(suite=base.benchmark.suite, name=base.benchmark.name,
                            parameters={k: v for k, v in base.benchmark.parameters.items() if k != "condition"}
                            | {"scenario": cell.scenario.value}
                            | ({"interference": cell.args["interference"]} if "interference" in cell.args else {})),
        environment=base.environment, started_at=base.started_at,
        labels={ROLE_LABEL: AGGREGATE, "job_label": cell.label,
                "roles": json.dumps({f"{r.role}{r.index}": r.doc.labels.get("address", r.doc.labels.get("target", ""))
                                     for r in roles})},
    )
    failed = [r for r in roles if r.doc.status is not Status.OK]
    if failed:
        first = min(failed, key=lambda r: r.ended)
        doc.status = Status.FAILED if any(r.doc.status is Status.FAILED for r in failed) else Status.SKIPPED
        doc.error = f"role {first.role} {first.index} ({first.doc.labels.get('target', '?')}): {first.doc.error}"
    return doc


def distributed(cell: Job, roles: Sequence[RoleOutcome], network: ResultDocument | None = None) -> ResultDocument:
    workers = sorted((r for r in roles if r.role == "worker"), key=lambda r: r.index)
    doc = _cell_document(cell, workers[0].doc if workers else None, roles)
    doc.labels["mode"] = str(cell.args.get("mode", ""))
    if roles:
        doc.add("elapsed_time", max(r.ended for r in roles) - min(r.launched for r in roles), "s",
                scope="first_launch_to_last_exit", clock="controller_monotonic")
    if doc.status is not Status.OK:
        return doc
    found = [value(w.doc, "throughput") for w in workers]
    rates = [rate for rate in found if rate is not None]
    if len(rates) != len(found):
        doc.status, doc.error = Status.FAILED, "a worker's document has no throughput"
        return doc
    model = {"model": cell.args.get("model", ""), "data": cell.args.get("data", "")}
    rate_unit = unit(workers[0].doc, "throughput", "images/s")
    doc.add("throughput", sum(rates), rate_unit, scope="cluster", workers=len(workers), **model)
    for worker, rate in zip(workers, rates, strict=True):
        doc.add("worker_throughput", rate, rate_unit, task_index=worker.index, **model)
        measured = value(worker.doc, "measured_time")
        if measured is not None:
            doc.add("worker_measured_time", measured, "s", task_index=worker.index)
    doc.add("measured_window_overlap", common_fraction([window(w.doc) for w in workers]), "fraction",
            scope="workers")
    if network is not None and network.status is Status.OK:
        for sample in network.samples:
            if sample.metric in ("tcp_throughput", "tcp_latency", "tcp_retransmits"):
                doc.add(f"network_{sample.metric}", sample.value, sample.unit,
                        path=network.labels.get("network_path", ""), **sample.labels)
    elif network is not None:
        doc.labels["network_error"] = (network.error or "network measurement failed")[:500]
    return doc


def _counters(doc: ResultDocument, into: ResultDocument, role: str) -> None:
    for sample in doc.samples:
        if sample.metric in COUNTERS and sample.labels.get("scope") != "children":
            into.add(sample.metric, sample.value, sample.unit, role=role,
                     **{k: v for k, v in sample.labels.items() if k != ROLE_LABEL})


def shared(cell: Job, roles: Sequence[RoleOutcome]) -> ResultDocument:
    """Background interference (roles alone, foreground, background) or N tenants (alone, tenant...)."""
    alone = next((r for r in roles if r.role == "alone"), None)
    loaded = [r for r in roles if r.role in ("foreground", "tenant")]
    background = next((r for r in roles if r.role == "background"), None)
    doc = _cell_document(cell, alone.doc if alone else None, roles)
    if doc.status is not Status.OK or alone is None or not loaded:
        return doc
    model = {"model": doc.benchmark.name, "data": cell.args.get("data", "")}
    spec = spec_of(cell.suite)
    for label in spec.shared_labels:
        if label in loaded[0].doc.labels:
            doc.labels[label] = loaded[0].doc.labels[label]
        if label in alone.doc.labels:
            doc.labels[f"{label}_alone"] = alone.doc.labels[label]
    not_measured = []
    for metric, higher in spec.shared_metrics:
        base = value(alone.doc, metric)
        found = [value(r.doc, metric) for r in loaded]
        under = [u for u in found if u is not None]
        if base is None or len(under) != len(found):
            if metric in spec.shared_optional:
                not_measured.append(metric)
                continue
            doc.status, doc.error = Status.FAILED, f"a role's document has no {metric}"
            return doc
        mean_under = statistics.fmean(under)
        metric_unit = unit(alone.doc, metric, "s" if metric == "elapsed_time" else "images/s")
        doc.add(metric, mean_under, metric_unit, condition="loaded", **model)
        doc.add(alone_metric(metric), base, metric_unit, condition="alone", **model)
        doc.add(degradation_metric(metric), degradation(base, mean_under, higher_is_better=higher), "%", **model)
    if not_measured:
        doc.labels["not_measured"] = ",".join(not_measured)
    if cell.args.get("interference") == "tenants" and not spec.tenants_in_one_job:
        doc.add("tenants_throughput_sum", sum(value(r.doc, "throughput") or 0.0 for r in loaded),
                unit(alone.doc, "throughput", "images/s"), **model)
        doc.add("tenants_window_overlap", common_fraction([window(r.doc) for r in loaded]), "fraction")
    for metric in spec.tenants_metrics if cell.args.get("interference") == "tenants" else ():
        total = value(loaded[0].doc, metric)  # one job held every tenant: its document says the whole machine's
        if total is not None:
            doc.add(metric, total, unit(loaded[0].doc, metric, ""), **model)
    if background is not None:
        rate = value(background.doc, "throughput")
        if rate is not None:
            params = background.doc.benchmark.parameters
            doc.add("background_throughput", rate, unit(background.doc, "throughput", "images/s"),
                    model=background.doc.benchmark.name,
                    batch_size=str(params.get("batch_size_per_device", params.get("batch_size", ""))),
                    **({"task": str(params["task"])} if "task" in params else {}))
        fg_window = window(loaded[0].doc)
        shared_s = overlap(window(background.doc), fg_window)
        doc.add("background_overlap", shared_s, "s")
        covered = shared_s / (fg_window[1] - fg_window[0]) if fg_window and fg_window[1] > fg_window[0] else 0.0
        doc.add("background_coverage", covered, "fraction")
        if covered < 0.99:
            doc.labels["background_covered"] = "false"  # the foreground ran partly alone: say so
    for role in roles:
        _counters(role.doc, doc, f"{role.role}{role.index if role.role == 'tenant' else ''}")
    return doc
