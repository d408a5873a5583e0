"""Airflow plugin: a "Benchmark reports" entry in the UI's Browse menu, serving dlbench reports."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from dlbench.ui.app import create_app


class DlbenchReportsPlugin(AirflowPlugin):
    name = "dlbench_reports"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/dlbench", "name": "dlbench reports"}]
    external_views = [{
        "name": "Benchmark reports",
        "href": "dlbench/",
        "destination": "nav",
        "category": "browse",
        "url_route": "dlbench-reports",
    }]
