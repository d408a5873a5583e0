"""dlbench_janitor: release leaked benchmark resources.

Every 30 minutes by default (``[dlbench] janitor_interval_minutes``; and from the trigger form): on
every cloud listed in the Airflow Variable ``dlbench_janitor_clouds`` (a JSON list of provider settings, e.g.
``[{"name": "ironic", "cloud": "production"}]``; the ``clouds`` param overrides it) and on the local
Docker engine, find resources carrying the dlbench tag whose expiry has passed or whose DAG run is
no longer running, release them, and report what was released, what was kept and why. Resources
without our tag are never touched. ``dry_run`` only reports. When it released the resources of a
run that Airflow still shows running (its process was killed: nothing else will ever end it), it
marks that DAG run failed through Airflow's REST API (connection ``dlbench_airflow_api``); a DAG
run already finished is left as it is. Nothing heavy is imported at parse time. The package's, as
:mod:`dlbench.dags.benchmark` is; its DAG file is one line (``dags/dlbench_janitor.py``).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param, dag, get_current_context, task

from dlbench import settings
from dlbench.hooks.airflow_api import AirflowApi
from dlbench.pipeline.routing import load_routing
from dlbench.providers import janitor


def janitor_dag() -> DAG:
    """The ``dlbench_janitor`` DAG, built at each parse of its one-line DAG file (the queue whose
    workers reach every cloud, ``[dlbench] routing``, docs/scaling.md, is read then)."""
    setup_queue = load_routing().setup_queue

    @dag(
        dag_id="dlbench_janitor",
        description="Release dlbench resources whose expiry passed or whose DAG run ended",
        schedule=settings.janitor_interval(),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        params={
            "clouds": Param(None, type=["null", "array"], items={"type": "object"}, title="Clouds",
                            description="provider settings objects to sweep, e.g. [{\"name\": \"ironic\", \"cloud\": "
                            "\"production\"}]; empty = the Airflow Variable dlbench_janitor_clouds"),
            "docker": Param(True, type="boolean", title="Sweep local Docker containers"),
            "dry_run": Param(False, type="boolean", title="Dry run (report only)"),
        },
        tags=["dlbench", "janitor"],
        default_args={"retries": 1, "retry_delay": timedelta(minutes=2), "owner": "dlbench",
                      "execution_timeout": timedelta(minutes=50)},
        doc_md=__doc__,
    )
    def dlbench_janitor() -> None:
        @task(**({"queue": setup_queue} if setup_queue else {}))
        def sweep() -> dict:
            ctx = get_current_context()
            params = ctx["params"]
            raw = params.get("clouds") or settings.janitor_clouds()
            clouds = janitor.clouds_from(raw)
            is_active = janitor.airflow_run_is_active(ctx["ti"].get_dr_count)
            # A DAG run's state is read through the Task SDK (no credentials); changing it takes the REST API.
            report = janitor.sweep(clouds, is_active, dry_run=bool(params.get("dry_run")),
                                   docker=bool(params.get("docker")), dag_run_state=ctx["ti"].get_dagrun_state,
                                   api=AirflowApi.from_connection())
            if report["errors"]:
                raise RuntimeError(f"janitor incomplete: {report['errors']}")
            return report

        sweep()

    return dlbench_janitor()
