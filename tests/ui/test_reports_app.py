"""The report browser: the real FastAPI app, and the plugin as Airflow's plugin manager loads it."""

from __future__ import annotations

import os
import subprocess
import sys

from fastapi.testclient import TestClient

from dlbench import paths
from dlbench.ui.app import create_app


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
