"""What each metric means to a reader: its direction, and whether it leads the report.

One table for every suite, so "is more better?" has a single answer everywhere (the text
table's arrows, the HTML, the charts). Suites added later only need a line here; a metric that
is not listed still works: it is lower-is-better when its unit is a time (s, ms, us, ns) and
higher-is-better otherwise, which is right for rates (images/s, GB/s, GFLOPS, IOPS).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from dlbench.suites import SUITES
from dlbench.suites.spec import alone_metric, degradation_metric


class Direction(StrEnum):
    HIGHER = "higher"
    LOWER = "lower"


HIGHER, LOWER = Direction.HIGHER, Direction.LOWER

SHARED_METRICS: dict[str, bool] = {m: higher for spec in SUITES.values() for m, higher in spec.shared_metrics}
"""What the suites' shared cells compare (metric: higher is better): each has its value alone and its
degradation % in a cell's document (:mod:`dlbench.pipeline.aggregate`)."""

SHARED_DIRECTIONS: dict[str, Direction] = {
    **{alone_metric(m): HIGHER if higher else LOWER for m, higher in SHARED_METRICS.items()},
    # positive = degraded, so lower is better
    **{degradation_metric(m): LOWER for m in SHARED_METRICS},
}

DIRECTION: dict[str, Direction] = {
    # tf_cnn (the core study's two figures: throughput and elapsed time)
    "throughput": HIGHER, "elapsed_time": LOWER, "measured_time": LOWER, "setup_time": LOWER,
    "launch_to_end_time": LOWER, "teardown_time": LOWER, "step_time": LOWER, "step_time_mean": LOWER,
    "step_time_std": LOWER, "step_time_p95": LOWER,
    # dltools (study 001's DL-tool set): seconds per batch per epoch (Table IX), epoch 1's excess over
    # epoch 2 in % (Table XIII); throughput above (images/s, words/s)
    "seconds_per_batch": LOWER, "epoch_time": LOWER, "batch_time_std": LOWER, "batch_time_p95": LOWER,
    "first_epoch_excess": LOWER, "data_load_time": LOWER,
    # cpu (hpcc, hpcg)
    "hpl": HIGHER, "hpcg": HIGHER, "dgemm": HIGHER, "stream_triad": HIGHER, "stream_triad_per_rank": HIGHER,
    "ptrans": HIGHER, "random_access": HIGHER,
    # disk
    "dd_write_bandwidth": HIGHER, "fio_bandwidth": HIGHER, "fio_iops": HIGHER, "fio_latency": LOWER,
    "ioping_iops": HIGHER, "ioping_latency": LOWER, "ioping_latency_mdev": LOWER,
    # network
    "tcp_throughput": HIGHER, "tcp_latency": LOWER, "tcp_retransmits": LOWER,
    # gpu
    "gpu_bandwidth": HIGHER, "gpu_convolution": HIGHER, "gpu_gemm": HIGHER, "gpu_histogram": HIGHER,
    "gpu_transpose": HIGHER,
    # deepbench
    "deepbench_tflops": HIGHER, "deepbench_time": LOWER, "deepbench_allreduce_busbw": HIGHER,
    # counters around every workload: less work, fewer faults and switches is better
    "peak_memory": LOWER, "minor_page_faults": LOWER, "major_page_faults": LOWER,
    "voluntary_context_switches": LOWER, "involuntary_context_switches": LOWER, "cpu_time_user": LOWER,
    "cpu_time_system": LOWER, "block_input_ops": LOWER, "block_output_ops": LOWER, "syscalls": LOWER,
    "cgroup_cpu_time": LOWER, "cgroup_cpu_time_user": LOWER, "cgroup_cpu_time_system": LOWER,
    "cgroup_cpu_throttled": LOWER, "cgroup_cpu_throttled_periods": LOWER, "cgroup_page_faults": LOWER,
    "cgroup_major_page_faults": LOWER, "cgroup_block_read": LOWER, "cgroup_block_written": LOWER,
    "writeback_dirtied": LOWER, "writeback_written": LOWER,
    # tf_cnn scenario cells (dlbench.pipeline.aggregate). distributed: the cluster's throughput and
    # elapsed time above, each worker's, how simultaneous the workers' windows were, the network
    # between the worker and parameter-server instances.
    "worker_throughput": HIGHER, "worker_measured_time": LOWER, "measured_window_overlap": HIGHER,
    "network_tcp_throughput": HIGHER, "network_tcp_latency": LOWER, "network_tcp_retransmits": LOWER,
    # shared: the job alone and its degradation % under load (every suite's shared metrics, from
    # the registry: below); the background job and how much of the foreground's window it covered
    # (more = a valid test).
    **SHARED_DIRECTIONS,
    "background_throughput": HIGHER, "background_overlap": HIGHER, "background_coverage": HIGHER,
    "tenants_throughput_sum": HIGHER, "tenants_window_overlap": HIGHER,
    # transformer (issue 24): training's achieved model FLOP rate and its share of the machine's
    # measured GEMM peak (MFU); generation's latency to the first token and between tokens
    # (throughput above: tokens/s). The peak is the machine's, not the job's: higher is a faster
    # machine, kept as the diagnostic that explains MFU.
    "model_tflops": HIGHER, "mfu": HIGHER, "peak_gemm": HIGHER,
    "time_to_first_token": LOWER, "inter_token_latency": LOWER,
    # serving (issue 41): the rate sustained at the latency target and the tokens/s there, per point
    # rates (requests/s, tokens/s: higher) and latencies (s: lower, by unit)
    "capacity": HIGHER, "capacity_output_throughput": HIGHER, "goodput": HIGHER, "failed_requests": LOWER,
    "startup_time": LOWER,
    # the share of the measured prompts' tokens the server's prefix cache served: near 0 is a
    # measurement of prefill, not of the cache (a diagnostic)
    "prefix_cache_hit_rate": LOWER,
}
"""Known metrics. Anything else: see :func:`direction`."""

TIME_UNITS = frozenset({"s", "ms", "us", "ns"})

HEADLINE: dict[str, list[str]] = {suite.value: list(spec.headline) for suite, spec in SUITES.items() if spec.headline}
"""Per suite, the metrics the report leads with (in this order: each suite's
:attr:`~dlbench.suites.spec.SuiteSpec.headline`); unknown suites lead with all
non-diagnostic metrics. Everything else is in the report's detail table and the warehouse."""

DIAGNOSTIC = frozenset({
    "step_time_mean", "step_time_std", "step_time_p95", "setup_time", "measured_time", "launch_to_end_time",
    "teardown_time",
    "peak_memory", "minor_page_faults", "major_page_faults", "voluntary_context_switches",
    "involuntary_context_switches", "cpu_time_user", "cpu_time_system", "block_input_ops", "block_output_ops",
    "hpl_skipped_size", "hpcg_cg_sets", "gpu_devices", "deepbench_allreduce_devices",
    "worker_throughput", "worker_measured_time", "measured_window_overlap",
    "tenants_throughput_sum", "tenants_window_overlap",
    "epoch_time", "batch_time_std", "batch_time_p95", "data_load_time",
    "model_tflops", "peak_gemm", "prefix_cache_hit_rate", *(alone_metric(m) for m in SHARED_METRICS),
})
DIAGNOSTIC_PREFIXES = ("cgroup_", "writeback_", "syscalls", "network_", "background_")
"""Kept in the warehouse and the report's detail table, never among the headline metrics: they
explain a headline number (why a cluster was slow, whether the background really overlapped),
they are not one a platform is ranked by."""

RELATIVE = frozenset({"first_epoch_excess", *(degradation_metric(m) for m in SHARED_METRICS)})
"""Already relative to a baseline (the same job alone; dltools: the same job's second epoch, in %):
compared as they are across platforms (figure 10), never divided by bare metal's (a ratio of
percentages near zero means nothing, and its sign flips with bare metal's)."""

EXCLUDED = frozenset({"step_time", "measured_window_start", "measured_window_end"})
"""Never tabled: per-step samples (hundreds per execution; aggregated by the runner into
step_time_*) and the measured window's clock readings (epoch seconds: timestamps, not performance)."""

HIGH_CARDINALITY_LABELS = frozenset({"step", "syscall"})
"""Samples carrying one of these labels are one of many (per step, per system call): not tabled."""


def direction(metric: str, unit: str) -> Direction:
    """Whether a larger value of ``metric`` (in ``unit``) is better."""
    known = DIRECTION.get(metric)
    if known is not None:
        return known
    return LOWER if unit in TIME_UNITS else HIGHER


def higher_is_better(metric: str, unit: str) -> bool:
    return direction(metric, unit) is HIGHER


def is_diagnostic(metric: str) -> bool:
    return metric in DIAGNOSTIC or metric.startswith(DIAGNOSTIC_PREFIXES)


def is_headline(suite: str, metric: str) -> bool:
    return metric in HEADLINE[suite] if suite in HEADLINE else not is_diagnostic(metric)


def is_tabled(metric: str, labels: Mapping[str, Any] | None) -> bool:
    """False for per-step and other high-cardinality samples, which no report table shows."""
    return metric not in EXCLUDED and not HIGH_CARDINALITY_LABELS.intersection(labels or {})
