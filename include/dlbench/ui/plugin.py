"""Airflow plugin: the dlbench results explorer (and the written reports) in the UI's Browse menu.

Registered through Airflow's plugin entry point (``airflow.plugins`` in pyproject.toml): an Airflow
that installs the package loads it, with nothing in its plugins folder (docs/install.md).

The FastAPI app (dlbench.ui.app) is mounted by Airflow's API server at ``/dlbench``; it reads the
warehouse named by DLBENCH_WAREHOUSE_URL or the ``dlbench_warehouse`` connection (else the
embedded SQLite file). Its links are relative, so any ``[api] base_url`` prefix works.

``create_app(airflow=True)`` puts every route behind Airflow's own login and permissions
(dlbench.ui.auth): a JWT or the UI's ``_token`` cookie, DAG read on dlbench_benchmark to read, DAG
edit to pin a baseline; without them the explorer answers 401/403 like Airflow's REST API.
docs/explorer.md "Access control".
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from dlbench.ui.app import create_app


class DlbenchReportsPlugin(AirflowPlugin):
    name = "dlbench_reports"
    fastapi_apps = [{"app": create_app(airflow=True), "url_prefix": "/dlbench", "name": "dlbench explorer"}]
    external_views = [{
        "name": "Benchmark explorer",
        "href": "dlbench/",
        "destination": "nav",
        "category": "browse",
        "url_route": "dlbench-explorer",
    }]
