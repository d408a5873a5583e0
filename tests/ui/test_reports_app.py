"""The report browser: the real FastAPI app, and the plugin as Airflow's plugin manager loads it."""

from __future__ import annotations

import os
import subprocess
import sys

from fastapi.testclient import TestClient

from dlbench import paths
from dlbench.ui.app import create_app
from tests.support.prereqs import ROOT


def test_lists_and_serves_reports_and_refuses_traversal():
    run_dir = paths.reports_dir() / "manual-2026-11-22"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "report.html").write_text("<h1>bare metal vs container</h1>")
    client = TestClient(create_app())
    index = client.get("/")
    assert index.status_code == 200 and 'href="runs/manual-2026-11-22/report.html"' in index.text
    assert client.get("/api/reports").json()[0]["run_id"] == "manual-2026-11-22"
    page = client.get("/runs/manual-2026-11-22/report.html")
    assert page.status_code == 200 and "bare metal vs container" in page.text
    assert client.get("/runs/..%2F..%2Fetc/passwd").status_code == 404
    assert client.get("/runs/manual-2026-11-22/..%2Freport.html").status_code == 404
    assert client.get("/runs/nope/report.html").status_code == 404


def test_airflow_loads_the_plugin(airflow_db):
    airflow = os.path.join(os.path.dirname(sys.executable), "airflow")
    proc = subprocess.run([airflow, "plugins", "--output", "json"], capture_output=True, text=True, check=True)
    assert "dlbench_reports" in proc.stdout
    assert "Benchmark explorer" in proc.stdout


def test_airflow_api_server_serves_the_explorer(airflow_db, tmp_path):
    """Airflow's own API server app (as `airflow api-server` builds it) mounts the plugin at
    /dlbench: the page and the JSON API answer there, from the warehouse of DLBENCH_WAREHOUSE_URL.
    Every request as an admin (the simple auth manager's all-admins mode): who else gets in is
    tests/ui/test_auth.py's question."""
    code = (
        "from fastapi.testclient import TestClient\n"
        "from airflow.api_fastapi.app import create_app\n"
        "client = TestClient(create_app())\n"
        "page = client.get('/dlbench/')\n"
        "assert page.status_code == 200 and 'dlbench results explorer' in page.text, page.status_code\n"
        "options = client.get('/dlbench/api/options')\n"
        "assert options.status_code == 200 and options.json()['runs'] == [], options.text\n"
        "print('served')\n"
    )
    env = {**os.environ, "DLBENCH_WAREHOUSE_URL": f"sqlite:///{tmp_path / 'warehouse.db'}",
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0 and "served" in proc.stdout, proc.stderr[-3000:]
