"""dlbench_janitor: release leaked benchmark resources.

Every 30 minutes (and from the trigger form): find Ironic nodes/allocations and local Docker
containers carrying the dlbench tag whose expiry has passed or whose DAG run is no longer
running, release them, and report what was done. Resources without our tag are never touched.
``dry_run`` only reports. Nothing heavy is imported at parse time.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import Param, dag, get_current_context, task


@dag(
    dag_id="dlbench_janitor",
    description="Release dlbench resources whose expiry passed or whose DAG run ended",
    schedule=timedelta(minutes=30),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={
        "cloud": Param("devcloud", type=["null", "string"], title="Cloud",
                       description="clouds.yaml cloud name; empty = do not sweep Ironic"),
        "conn_id": Param(None, type=["null", "string"], title="Airflow connection",
                         description="conn_type openstack; wins over cloud"),
        "clouds_file": Param(None, type=["null", "string"], title="clouds.yaml path"),
        "docker": Param(True, type="boolean", title="Sweep local Docker containers"),
        "dry_run": Param(False, type="boolean", title="Dry run (report only)"),
    },
    tags=["dlbench", "janitor"],
    default_args={"retries": 1, "retry_delay": timedelta(minutes=2), "owner": "dlbench",
                  "execution_timeout": timedelta(minutes=50)},
    doc_md=__doc__,
)
def dlbench_janitor() -> None:
    @task
    def sweep() -> dict:
        from dlbench.config import IronicSettings
        from dlbench.provisioning import janitor

        ctx = get_current_context()
        params = ctx["params"]
        settings = None
        if params.get("cloud") or params.get("conn_id"):
            settings = IronicSettings(cloud=params.get("cloud"), conn_id=params.get("conn_id"),
                                      clouds_file=params.get("clouds_file"))
        is_active = janitor.airflow_run_is_active(ctx["ti"].get_dr_count)
        report = janitor.sweep(settings, is_active, dry_run=bool(params.get("dry_run")),
                               docker=bool(params.get("docker")))
        if report["errors"]:
            raise RuntimeError(f"janitor incomplete: {report['errors']}")
        return report

    sweep()


dlbench_janitor()
