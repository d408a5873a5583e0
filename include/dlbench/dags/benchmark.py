"""dlbench_benchmark: compare deep-learning hosting options on the same workloads.

Weekly (and from the trigger form): validate the request, plan the job matrix, provision
targets (setup), run every job through dynamic task mapping, release the targets (teardown),
load all archived results into the warehouse and write the comparison report; then, after the
report, judge the run's pass/fail gates (docs/gates.md).

This module only declares and wires: every step is a function of ``dlbench.pipeline.steps``,
tested without Airflow. Nothing heavy is imported at module level (parse time matters). It is the
package's, so an Airflow that installs dlbench gets it with the package; its DAG file is one line
(``dags/dlbench_benchmark.py``; ``dlbench dags install DIR`` writes it: docs/install.md).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, dag, get_current_context, setup, task, teardown
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from dlbench import settings
from dlbench.jobs import BENCHMARK_DAG_ID, Job
from dlbench.pipeline import gates as gate_step
from dlbench.pipeline import steps
from dlbench.pipeline.routing import JOB_TASK, jobs_for_task, load_routing, parse_routing
from dlbench.providers.registry import PROVIDERS, provider_names
from dlbench.suites import DEFAULT_SUITES, Suite
from dlbench.workloads.profiles import TRAINING_FRAMEWORKS, DataKind, Framework, ModelName, Scenario, load_profiles
from dlbench.workloads.result import Platform

JOB_POOL = "dlbench_benchmark"
"""Jobs of the default route: one slot by default (one job at a time across all runs); more slots
are safe because a job holds its machines' lock while it measures (docs/scaling.md)."""
PROVISION_POOL = "dlbench_provision"
JOB_TASK_TIMEOUT = timedelta(hours=24)
"""Ceiling of one mapped job task. Each job's own timeout is derived from its profile's planned
work (a paper HPL + HPCG job: hours) and capped at this minus JOB_STOP_GRACE."""
JOB_STOP_GRACE = timedelta(minutes=10)
"""Left to the executor after a job's timeout: stop the workload, archive its failed document."""


REGRESSION_PARAMS = ("on_regression", "regression_baseline", "on_inconclusive_gate")
"""Params of the regressions and gates tasks, not of the benchmark request."""


def _queue(queue: str | None) -> dict[str, str]:
    """``queue=`` for a task when the deployment names one (else Airflow's default queue)."""
    return {"queue": queue} if queue else {}


def _choices(enum: type) -> list[str]:
    return [member.value for member in enum]


def params() -> dict[str, Param]:
    """The trigger form's fields, built when the DAG is (:func:`benchmark_dag`): the providers, profiles
    and suites they offer are read then."""
    return {
        "provider": Param(
            "local", enum=provider_names(), title="Provider",
            description="; ".join(f"{name}: {provider.summary}" for name, provider in PROVIDERS.items())
            + " (fill in the object of that name below).",
        ),
        "providers": Param(
            [], type="array", items={"type": "string", "enum": provider_names()}, title="Several providers",
            description="Several providers in one run (wins over Provider when not empty), e.g. ironic + nova to "
            "compare bare_metal, container_on_bare_metal, virtual_machine and container_on_vm in one run: each "
            "platform comes from the provider that offers it.",
        ),
        "platforms": Param(
            [Platform.BARE_METAL.value, Platform.CONTAINER_ON_BARE_METAL.value],
            type="array", items={"type": "string", "enum": _choices(Platform)}, title="Platforms",
            description="Hosting options to compare; results are normalized to bare_metal.",
        ),
        "suites": Param(
            [s.value for s in DEFAULT_SUITES], type="array", items={"type": "string", "enum": _choices(Suite)},
            title="Suites",
            description="tf_cnn: image-classification training (the core study; TensorFlow, PyTorch or JAX: "
            "Frameworks). "
            "cpu (HPL, HPCG), gpu "
            "(CUDA programs; skipped without a GPU), deepbench (TF kernels), disk (dd, ioping, fio), network (iperf3). "
            "dltools (opt-in): study 001's FCN5 / AlexNet / ResNet-50 (CIFAR) / LSTM set, seconds per batch per epoch. "
            "fathom (opt-in): study 003's eight Fathom workloads, training and inference. transformer (opt-in): a "
            "GPT-style decoder in PyTorch, training (tokens/s, MFU) and generation (time to first token, tokens/s). "
            "serving (opt-in): an LLM inference server (vLLM) under a concurrency and a Poisson-rate sweep, and the "
            "requests/s it sustains at the profile's latency target (docs/serving.md).",
        ),
        "models": Param(
            _choices(ModelName), type="array", items={"type": "string", "enum": _choices(ModelName)}, title="Models",
        ),
        "frameworks": Param(
            [Framework.TENSORFLOW.value], type="array",
            items={"type": "string", "enum": [f.value for f in TRAINING_FRAMEWORKS]},
            title="Frameworks",
            description="Who trains the tf_cnn networks (the same architectures, protocol and results): "
            "tensorflow (the study's), pytorch, jax. Platforms are compared per framework; the report compares the "
            "frameworks on the same "
            "platform (docs/frameworks.md).",
        ),
        "data": Param(
            _choices(DataKind), type="array", items={"type": "string", "enum": _choices(DataKind)}, title="Data",
            description="synthetic: generated on the device; real: ImageNet-format TFRecords from disk.",
        ),
        "scenarios": Param(
            [Scenario.SINGLE.value], type="array", items={"type": "string", "enum": _choices(Scenario)},
            title="Scenarios",
            description="single: one instance per job. distributed: 1 parameter server + 2 workers on 3 instances "
            "(the study's synchronous mode). shared: the job alone, then next to a background AlexNet job on the same "
            "machine, plus N co-located tenants (degradation %).",
        ),
        "distributed_mode": Param(
            None, type=["null", "string"], enum=[None, *(m.value for m in Framework.TENSORFLOW.distributed_modes)],
            title="Distributed mode (TensorFlow)",
            description="distributed_replicated: the study's (TF1, synchronous through the parameter server). "
            "multi_worker_mirrored: TF 2's synchronous all-reduce (no parameter server). Empty = the profile's. "
            "PyTorch always uses DistributedDataParallel (ddp), JAX jax.distributed.",
        ),
        # Not an enum: user profiles (DLBENCH_PROFILES_FILE, Variable dlbench_profiles) may change after
        # parse time. The form suggests the built-ins; validate_request refuses an unknown name, listing
        # the allowed ones.
        "profile": Param(
            "auto", type="string", minLength=1, examples=["auto", *load_profiles()], title="Profile",
            description="A profile name. paper: the studies' exact parameters (real hardware). smoke: toy sizes. "
            "auto: the Airflow Variable dlbench_profile (default smoke). User profiles (YAML file named by "
            "DLBENCH_PROFILES_FILE, or the Airflow Variable dlbench_profiles) are selected by their name: "
            "docs/profiles.md.",
        ),
        "repetitions": Param(
            None, type=["null", "integer"], minimum=1, maximum=100, title="Repetitions",
            description="Repetitions of every cell; empty = the profile's default.",
        ),
        "equivalence_margin_pct": Param(
            None, type=["null", "number"], exclusiveMinimum=0, maximum=50, title="Equivalence margin (%)",
            description="Platforms whose whole 95 % interval lies within this many per cent of bare metal are "
            "equivalent, wholly beyond it better or worse; in between the report says how many repetitions would "
            "resolve it (docs/statistics.md). Empty = the profile's (3).",
        ),
        "data_dir": Param(
            None, type=["null", "string"], title="Real-data directory",
            description="ImageNet TFRecords (train-*) already on every target machine; empty = a generated demo "
            "set, staged to every machine.",
        ),
        "gates": Param(
            None, type=["null", "array"], items={"type": "object"}, title="Gates (pass/fail)",
            description="Thresholds on the comparison with bare metal, e.g. "
            "[{\"platform\": \"container_on_bare_metal\", "
            "\"metric\": \"throughput\", \"op\": \">=\", \"ratio\": 0.9, \"confidence\": 0.95}]: the gates task "
            "(after the report) fails when the interval's end misses a threshold or there is no interval "
            "(docs/gates.md). Empty = the Airflow Variable dlbench_gates; [] = no gates.",
        ),
        "every_machine": Param(
            False, type="boolean", title="Every machine (fleet survey)",
            description="Run every single-scenario job once on each machine of its platform (e.g. each of the "
            "ironic.nodes.bare_metal nodes) instead of spreading the jobs over the machines: each result is "
            "labelled with its machine, so a slow node shows up. Not with the distributed or shared scenarios.",
        ),
        # What a regression against the case's history does (docs/regressions.md); not part of the
        # benchmark request (validate_request leaves these out).
        "on_regression": Param(
            "fail", enum=["fail", "warn"], title="On regression",
            description="fail: the regressions task fails (the run is failed) and the notifiers of the Variable "
            "dlbench_regression_notifiers are called. warn: notifiers only. Scheduled runs: the Variable "
            "dlbench_on_regression when set.",
        ),
        "on_inconclusive_gate": Param(
            "fail", enum=["fail", "warn"], title="On an inconclusive gate",
            description="A gate is inconclusive when an interval straddles its threshold or there is none (too few "
            "repetitions, no bare-metal result): fail: the gates task fails the run (an SLA needs evidence); warn: it "
            "says so and passes. A gate shown beyond its threshold always fails (docs/gates.md).",
        ),
        "regression_baseline": Param(
            None, type=["null", "string"], title="Regression baseline run",
            description="A run id to compare with; empty = the pinned baseline (dlbench baseline pin), else the "
            "last 8 runs of each case.",
        ),
        # One settings object per provider (the request's discriminated union, docs/openstack.md): the
        # clouds', an existing Kubernetes cluster's, and this host's (local: gpus, VMs).
        **{name: Param(None, type=["null", "object"], title=f"{name} settings (provider {name})",
                       description=f"Used when {name} is the provider or one of the providers: "
                       + " ".join((model.__doc__ or "").split())
                       + f" Fields: dlbench.providers.{name}.{model.__name__}.")
           for name, model in ((name, p.settings) for name, p in PROVIDERS.items())},
    }


def benchmark_dag() -> DAG:
    """The ``dlbench_benchmark`` DAG, built now: a DAG file's one line (``dags/dlbench_benchmark.py``,
    or what ``dlbench dags install`` writes) calls it at every parse, so the deployment's settings
    read at parse time (its routing: a task's queue and pool; the retry delay; the form's choices)
    are those of the parse, as when the definition was the DAG file itself."""
    # Queues and pools of this deployment ([dlbench] routing; docs/scaling.md): from the environment /
    # airflow.cfg at parse time, because a task's queue and pool are fixed then.
    routing = load_routing()
    # Before a task's retry ([dlbench] retry_delay_seconds, 30 s by default; fixed at parse time).
    retry_delay = settings.retry_delay()

    @dag(
        dag_id=BENCHMARK_DAG_ID,
        description="Bare metal vs VM vs containers: TensorFlow training and micro-benchmarks, into the warehouse",
        schedule="@weekly",
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        params=params(),
        tags=["dlbench", "benchmark"],
        default_args={"retries": 0, "execution_timeout": timedelta(minutes=30), "owner": "dlbench"},
        doc_md=__doc__,
    )
    def dlbench_benchmark() -> None:
        @task(retries=0, execution_timeout=timedelta(minutes=2))
        def validate_request() -> dict:
            """Fail before anything is provisioned, naming the bad field and the allowed values."""

            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline.airflow_support import failures_recorded, is_scheduled

            ctx = get_current_context()
            scheduled = is_scheduled(ctx["dag_run"])
            with failures_recorded(ctx["ti"]):
                from_variable = False
                try:
                    form = {k: v for k, v in dict(ctx["params"]).items() if k not in REGRESSION_PARAMS}
                    params = steps.request_params(
                        form, scheduled=scheduled,
                        scheduled_request=settings.scheduled_request() if scheduled else None)
                    if params.get("profile") in (None, "", "auto"):
                        params["profile"] = settings.default_profile()
                    params, from_variable = gate_step.with_variable_gates(params, settings.gates())  # the request's win
                    return steps.validate(params, max_jobs=settings.max_map_length(),
                                          user_profiles=settings.user_profiles())
                except steps.ConfigError as exc:
                    raise AirflowFailException(gate_step.source_note(str(exc), from_variable)) from None

        @task(retries=0, execution_timeout=timedelta(minutes=2))
        def plan(request: dict) -> list[dict]:
            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline.airflow_support import failures_recorded

            ctx = get_current_context()
            with failures_recorded(ctx["ti"]):
                return steps.plan(request, ctx["run_id"])

        @task(retries=0, execution_timeout=timedelta(minutes=2))
        def run_tags(request: dict) -> dict:
            """Run id, DAG run and expiry written on every resource (the janitor's key); the run's
            request, DAG, provider and tags are archived beside its documents."""
            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline import airflow_support

            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline.airflow_support import failures_recorded

            ctx = get_current_context()
            with failures_recorded(ctx["ti"]):
                default_hours = settings.expiry_hours()
                tags = steps.tags_for(ctx["run_id"], ctx["dag"].dag_id, ctx["run_id"],
                                      expiry=steps.expiry_for(request, default_hours))
                scheduled = airflow_support.is_scheduled(ctx["dag_run"])
                steps.archive_run(ctx["run_id"], request, ctx["dag"].dag_id, tags, scheduled)  # self-describing archive
                return tags

        @setup
        @task(pool=PROVISION_POOL, retries=0, execution_timeout=timedelta(minutes=45), **_queue(routing.setup_queue))
        def provision(request: dict, tags: dict) -> list[dict]:
            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline.airflow_support import failures_recorded

            ctx = get_current_context()
            timeout = ctx["task"].execution_timeout
            with failures_recorded(ctx["ti"]):
                # The rollback budget comes out of the task's own execution_timeout (issue: a setup
                # that times out must still have time to release what it made).
                return steps.provision(request, tags, budget_s=timeout.total_seconds() if timeout else None)

        @task(pool=JOB_POOL, retries=1, retry_delay=retry_delay, execution_timeout=JOB_TASK_TIMEOUT,
              map_index_template="{{ job_label }}")
        def run_job(job: dict, targets: list[dict], request: dict, tags: dict) -> dict:


            ctx = get_current_context()
            the_job = Job.model_validate(job)
            # Names the mapped index in the UI, with the job's own timeout (derived from its profile).
            ctx["job_label"] = (f"{the_job.label} (timeout {the_job.timeout_s} s)" if the_job.timeout_s
                                else the_job.label)
            limit = ctx["task"].execution_timeout or JOB_TASK_TIMEOUT
            try:
                return steps.run_job(job, targets, request=request, tags=tags,  # holds the run's lease
                                     max_timeout=(limit - JOB_STOP_GRACE).total_seconds())
            except steps.JobSkipped as exc:
                raise AirflowSkipException(str(exc)) from None

        @teardown(on_failure_fail_dagrun=True)  # a failed release may leak machines: fail the run loudly
        @task(retries=2, retry_delay=retry_delay, execution_timeout=timedelta(minutes=45),
              **_queue(routing.setup_queue))
        def release(request: dict | None, tags: dict | None, targets: list[dict] | None) -> None:

            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline.airflow_support import failures_recorded, first_failure, not_run_because

            ti = get_current_context()["ti"]
            if request is None or tags is None:  # nothing was provisioned: nothing carries the run's tags
                raise AirflowSkipException(not_run_because(first_failure(ti, "release"), "release"))
            with failures_recorded(ti):
                steps.release(request, tags, targets)

        @task(retries=0, execution_timeout=timedelta(minutes=2))
        def route_jobs(jobs: list[dict], request: dict, task_id: str, routing: dict) -> list[dict]:
            """The planned jobs of one job task: those whose provider is routed to it."""

            return jobs_for_task(jobs, request, task_id, parse_routing(routing))

        @task(trigger_rule="all_done", retries=2, retry_delay=retry_delay)
        def load(request: dict | None) -> dict:
            """Load every archived document of this run (failed and skipped ones too)."""

            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline import airflow_support

            ctx = get_current_context()
            if request is None:
                raise AirflowSkipException(airflow_support.not_run_because(
                    airflow_support.first_failure(ctx["ti"], "load"), "load"))
            with airflow_support.failures_recorded(ctx["ti"]):
                return steps.load_run(ctx["run_id"], request, ctx["dag"].dag_id, airflow_support.warehouse_url())

        @task(trigger_rule="all_done")
        def report(loaded: dict | None) -> dict:

            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline import airflow_support

            ti = get_current_context()["ti"]
            failure = airflow_support.first_failure(ti, "report")
            if not loaded:
                raise AirflowSkipException(airflow_support.not_run_because(failure, "report"))
            with airflow_support.failures_recorded(ti):
                url = airflow_support.warehouse_url()
                if not steps.run_in_warehouse(loaded["run_id"], url):  # e.g. provisioning failed: no job ran
                    raise AirflowSkipException(airflow_support.not_run_because(failure, "report") if failure else
                                               f"report not run: no document of run {loaded['run_id']} reached the "
                                               "warehouse")
                result = steps.report_run(loaded["run_id"], url)
            print(result["table"])
            print(f"report: {result['html']}")
            return {"html": result["html"]}

        @task(trigger_rule="all_done")
        def check(jobs: list[dict] | None, report_result: dict | None) -> dict:
            """Make the DAG run fail visibly when a step or a job failed (skips are reported, not
            failures): the leaf that decides the run's state. It repeats the FIRST failure of the
            run (e.g. the validation error), not a later symptom."""
            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline import airflow_support

            ctx = get_current_context()
            with airflow_support.failures_recorded(ctx["ti"]):
                failure = airflow_support.first_failure(ctx["ti"])
                if failure:
                    raise RuntimeError(f"{failure['task']} failed: {failure['error']}")
                outcome = steps.outcome(ctx["run_id"], len(jobs or []))
                if outcome["failures"] or outcome["counts"]["missing"] or not report_result:
                    raise RuntimeError(steps.describe_outcome(outcome, report_missing=not report_result))
                return outcome

        @task(trigger_rule="all_done", retries=0, execution_timeout=timedelta(minutes=15))
        def regressions(report_result: dict | None) -> dict:
            """This run's cases against their history: a regression fails this task (Param
            on_regression, default fail) and calls the notifiers of dlbench_regression_notifiers."""
            # heavy: Airflow task models and the alerts analysis (pandas); loaded when the task runs, not at every parse
            from dlbench.pipeline import airflow_support, regression_alerts

            return regression_alerts.run(get_current_context(), report_result, variable=settings.variable,
                                         warehouse_url=airflow_support.warehouse_url)

        @task(trigger_rule="all_done", retries=0, execution_timeout=timedelta(minutes=15))
        def gates(request: dict | None, report_result: dict | None) -> dict:
            """The run's pass/fail gates (request field gates, else the Variable dlbench_gates;
            docs/gates.md) on this run's comparison; fails naming every gate that did not pass. Runs
            after the report, so a failed gate still leaves the report to read."""

            # heavy: Airflow task models; loaded when the task runs, not at every parse
            from dlbench.pipeline import airflow_support

            ctx = get_current_context()
            if request is None:
                raise AirflowSkipException(airflow_support.not_run_because(
                    airflow_support.first_failure(ctx["ti"], "gates"), "gates"))
            if not request.get("gates"):
                raise AirflowSkipException("no gates declared (request field gates, else the Airflow Variable "
                                           "dlbench_gates; docs/gates.md)")
            outcome = gate_step.evaluate_run(ctx["run_id"], request, airflow_support.warehouse_url(),
                                             policy=str(ctx["params"].get("on_inconclusive_gate") or "fail"))
            print("\n".join(outcome.lines))
            print(f"gates: {outcome.url}")
            if outcome.failure:
                raise AirflowFailException(outcome.failure)
            return outcome.as_xcom()

        request = validate_request()
        jobs = plan(request)
        tags = run_tags(request)
        targets = provision(request, tags)
        if not routing.routes:
            results = [run_job.partial(targets=targets, request=request, tags=tags).expand(job=jobs)]
        else:  # one mapped job task per route (its queue, its pool), the rest on run_job
            routes = routing.model_dump(mode="json")
            results = []
            for task_id, extra in [(JOB_TASK, {}), *((r.task_id, {"pool": r.pool, **_queue(r.queue)})
                                                     for r in routing.routes)]:
                mine = route_jobs.override(task_id=f"jobs_of_{task_id}")(jobs, request, task_id, routes)
                results.append(run_job.override(task_id=task_id, **extra)
                               .partial(targets=targets, request=request, tags=tags).expand(job=mine))
        released = release(request, tags, targets)
        results >> released
        loaded = load(request)
        results >> loaded
        released >> loaded
        reported = report(loaded)
        check(jobs, reported)
        regressions(reported)
        # After the report, a leaf beside check and regressions: Airflow decides a run's state by its
        # leaves, so none of the three may sit upstream of another (its failure would no longer fail the run).
        gates(request, reported)

    return dlbench_benchmark()
