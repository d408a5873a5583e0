"""A scenario cell's document from its roles' documents, checked against a computation done here."""

from __future__ import annotations

from dlbench.jobs import Job
from dlbench.pipeline import aggregate
from dlbench.pipeline.aggregate import RoleOutcome
from dlbench.workloads.profiles import Scenario
from dlbench.workloads.result import Benchmark, Environment, Platform, ResultDocument, Status


def _cell(scenario: Scenario, **args) -> Job:
    return Job(job_id="c" * 24, run_id="run", platform=Platform.BARE_METAL, suite="tf_cnn", command="tf-cnn",
               args={"model": "alexnet", "data": "synthetic", **args}, profile="smoke", scenario=scenario)


def _doc(role: str, *, throughput: float | None = None, elapsed: float | None = None,
         window: tuple[float, float] | None = None, status: Status = Status.OK, error: str | None = None,
         **counters: float) -> ResultDocument:
    doc = ResultDocument(run_id="run", benchmark=Benchmark(suite="tf_cnn", name="alexnet", parameters={
        "scenario": "x", "condition": role, "batch_size_per_device": 8}),
        environment=Environment(hostname="h", platform=Platform.BARE_METAL), status=status, error=error,
        labels={"role": role})
    if throughput is not None:
        doc.add("throughput", throughput, "images/s")
    if elapsed is not None:
        doc.add("elapsed_time", elapsed, "s")
    if window is not None:
        doc.add("measured_window_start", window[0], "s")
        doc.add("measured_window_end", window[1], "s")
    for name, value in counters.items():
        doc.add(name, value, "count", scope="process")
    return doc


def test_distributed_cell_sums_workers_and_spans_first_launch_to_last_exit():
    roles = [RoleOutcome("ps", 0, _doc("ps"), launched=10.0, ended=31.0),
             RoleOutcome("worker", 0, _doc("worker", throughput=12.5, window=(100.0, 110.0)), 10.2, 29.0),
             RoleOutcome("worker", 1, _doc("worker", throughput=11.5, window=(101.0, 110.5)), 10.4, 30.0)]
    network = ResultDocument(run_id="run", benchmark=Benchmark(suite="network", name="network"),
                             environment=Environment(hostname="h", platform=Platform.BARE_METAL),
                             labels={"network_path": "p"})
    network.add("tcp_throughput", 0.94, "Gbit/s", tool="iperf3")
    doc = aggregate.distributed(_cell(Scenario.DISTRIBUTED, mode="distributed_replicated"), roles, network)
    assert doc.status is Status.OK and doc.job_id == "c" * 24 and doc.labels["role"] == "aggregate"
    assert doc.sample("throughput").value == 12.5 + 11.5
    assert doc.sample("elapsed_time").value == 31.0 - 10.0
    assert sorted(s.value for s in doc.samples if s.metric == "worker_throughput") == [11.5, 12.5]
    # common window 101..110 = 9 s of a mean window of (10 + 9.5) / 2
    assert abs(doc.sample("measured_window_overlap").value - 9 / 9.75) < 1e-9
    assert doc.sample("network_tcp_throughput").value == 0.94
    assert doc.benchmark.parameters["scenario"] == "distributed" and "condition" not in doc.benchmark.parameters


def test_a_failed_role_fails_the_cell_naming_it():
    roles = [RoleOutcome("ps", 0, _doc("ps", status=Status.FAILED, error="stopped by SIGTERM"), 0, 9),
             RoleOutcome("worker", 1, _doc("worker", status=Status.FAILED, error="killed: signal 9"), 0, 5),
             RoleOutcome("worker", 0, _doc("worker", throughput=3.0), 0, 9)]
    doc = aggregate.distributed(_cell(Scenario.DISTRIBUTED), roles)
    assert doc.status is Status.FAILED
    assert doc.error.startswith("role worker 1") and "signal 9" in doc.error  # the first to end, not the stopped
    assert all(s.metric != "throughput" for s in doc.samples)


def test_background_degradation_against_the_alone_baseline():
    alone = _doc("alone", throughput=20.0, elapsed=30.0, window=(0, 10), minor_page_faults=100)
    fg = _doc("foreground", throughput=15.0, elapsed=36.0, window=(50, 62), minor_page_faults=180)
    bg = _doc("background", throughput=5.0, window=(45, 70), minor_page_faults=900)
    roles = [RoleOutcome("alone", 0, alone, 0, 30), RoleOutcome("foreground", 0, fg, 40, 76),
             RoleOutcome("background", 0, bg, 30, 78)]
    doc = aggregate.shared(_cell(Scenario.SHARED, interference="background"), roles)
    assert doc.status is Status.OK
    assert abs(doc.sample("degradation_throughput").value - (20 - 15) / 20 * 100) < 1e-9
    assert abs(doc.sample("degradation_elapsed_time").value - (36 - 30) / 30 * 100) < 1e-9
    assert doc.sample("background_throughput").value == 5.0
    assert doc.sample("background_overlap").value == 12 and doc.sample("background_coverage").value == 1.0
    assert "background_covered" not in doc.labels
    faults = {s.labels["role"]: s.value for s in doc.samples if s.metric == "minor_page_faults"}
    assert faults == {"alone": 100, "foreground": 180, "background": 900}
    assert doc.benchmark.parameters["interference"] == "background"


def test_a_background_that_started_late_is_said():
    roles = [RoleOutcome("alone", 0, _doc("alone", throughput=10.0, elapsed=5.0), 0, 5),
             RoleOutcome("foreground", 0, _doc("foreground", throughput=9.0, elapsed=6.0, window=(10, 20)), 6, 12),
             RoleOutcome("background", 0, _doc("background", throughput=1.0, window=(15, 30)), 5, 30)]
    doc = aggregate.shared(_cell(Scenario.SHARED, interference="background"), roles)
    assert doc.sample("background_coverage").value == 0.5 and doc.labels["background_covered"] == "false"


def test_tenants_degradation_uses_the_mean_tenant():
    roles = [RoleOutcome("alone", 0, _doc("alone", throughput=10.0, elapsed=10.0), 0, 10),
             RoleOutcome("tenant", 0, _doc("tenant", throughput=6.0, elapsed=15.0, window=(0, 10)), 10, 25),
             RoleOutcome("tenant", 1, _doc("tenant", throughput=4.0, elapsed=17.0, window=(1, 10)), 10, 27)]
    doc = aggregate.shared(_cell(Scenario.SHARED, interference="tenants", tenants=2), roles)
    assert abs(doc.sample("degradation_throughput").value - 50.0) < 1e-9  # (10 - 5) / 10
    assert abs(doc.sample("degradation_elapsed_time").value - 60.0) < 1e-9  # (16 - 10) / 10
    assert doc.sample("tenants_throughput_sum").value == 10.0
    assert aggregate.is_role_document({"role": "tenant"}) and not aggregate.is_role_document({"role": "aggregate"})
    assert not aggregate.is_role_document({})


def _serving(role: str, capacity: float, bound: str, tokens: float | None) -> ResultDocument:
    """A serving role's document as the job writes it: tokens/s at the capacity only when a rate met
    the target (bound ``measured`` or ``at_least``; ``below``: even the lowest rate missed it)."""
    doc = ResultDocument(run_id="run", benchmark=Benchmark(suite="serving", name="llama-smoke", parameters={
        "scenario": "shared", "condition": role}), environment=Environment(hostname="h", platform=Platform.BARE_METAL),
        labels={"role": role, "capacity_bound": bound})
    doc.add("capacity", capacity, "requests/s")
    if tokens is not None:
        doc.add("capacity_output_throughput", tokens, "tokens/s")
    doc.add("measured_window_start", 10.0, "s")
    doc.add("measured_window_end", 20.0, "s")
    return doc


def test_a_server_below_the_target_under_load_is_a_measurement_not_a_failure():
    """Landing CI of stop 50: beside the training background on a loaded machine the server missed
    the target even at the lowest rate (bound ``below``, so no tokens/s at a capacity); the cell
    failed with "a role's document has no capacity_output_throughput". It is the answer the shared
    scenario asks for: the capacity's degradation (against the lowest rate, an upper bound of the
    loaded capacity, as the bound says), the metric that could not be measured named."""
    cell = Job(job_id="s" * 24, run_id="run", platform=Platform.BARE_METAL, suite="serving", command="serving",
               args={"interference": "background"}, profile="smoke", scenario=Scenario.SHARED)
    roles = [RoleOutcome("alone", 0, _serving("alone", 16.0, "measured", 500.0), 0, 30),
             RoleOutcome("foreground", 0, _serving("foreground", 4.0, "below", None), 40, 80),
             RoleOutcome("background", 0, _doc("background", throughput=5.0, window=(5, 30)), 30, 90)]
    doc = aggregate.shared(cell, roles)
    assert doc.status is Status.OK, doc.error
    assert doc.sample("capacity_alone").value == 16.0 and doc.sample("capacity", condition="loaded").value == 4.0
    assert doc.sample("degradation_capacity").value == (16.0 - 4.0) / 16.0 * 100
    assert not [s for s in doc.samples if "capacity_output_throughput" in s.metric]
    assert doc.labels["not_measured"] == "capacity_output_throughput"
    assert (doc.labels["capacity_bound"], doc.labels["capacity_bound_alone"]) == ("below", "measured")
    # A metric the suite does not declare optional still fails the cell when a role lacks it.
    roles[1] = RoleOutcome("foreground", 0, ResultDocument(
        run_id="run", benchmark=Benchmark(suite="serving", name="llama-smoke"),
        environment=Environment(hostname="h", platform=Platform.BARE_METAL), labels={"role": "foreground"}), 40, 80)
    failed = aggregate.shared(cell, roles)
    assert failed.status is Status.FAILED and failed.error == "a role's document has no capacity"
