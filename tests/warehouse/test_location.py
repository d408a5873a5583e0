"""One documented precedence for the warehouse location, logged at every load (password hidden)."""

from __future__ import annotations

import logging

from dlbench.hooks import warehouse as warehouse_hook
from dlbench.pipeline import airflow_support


def test_precedence_env_then_connection_then_default(monkeypatch, tmp_path, caplog, capfd):
    monkeypatch.delenv("DLBENCH_WAREHOUSE_URL", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_DLBENCH_WAREHOUSE", "postgres://bench:s3cret@db.example.org:5432/dlbench")
    url, source = warehouse_hook.warehouse_location()
    assert source == "Airflow connection dlbench_warehouse" and "db.example.org" in url
    monkeypatch.setenv("DLBENCH_WAREHOUSE_URL", f"sqlite:///{tmp_path}/w.db")
    caplog.set_level(logging.INFO, logger="dlbench.pipeline.airflow_support")
    assert airflow_support.warehouse_url() == f"sqlite:///{tmp_path}/w.db"  # the env var wins, and says so
    logged = caplog.text + "".join(capfd.readouterr())  # Airflow's structlog may own the handlers
    assert "from environment variable DLBENCH_WAREHOUSE_URL" in logged
    monkeypatch.delenv("DLBENCH_WAREHOUSE_URL")
    caplog.clear()
    airflow_support.warehouse_url()
    logged = caplog.text + "".join(capfd.readouterr())
    assert "postgresql+psycopg2://bench:***@db.example.org:5432/dlbench" in logged
    assert "s3cret" not in logged
