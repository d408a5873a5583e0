"""Installing dlbench into an Airflow that already runs (docs/install.md): the DAGs come with the
package and a DAG folder needs one line per DAG; the plugin registers through Airflow's entry
point; the pools, Variables and connections come from the packaged airflow_settings.yaml, and an
operator's own values survive a re-run. Real Airflow (DagBag, its CLI on this stream's metadata DB)
and a real wheel built from this checkout."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from dlbench import airflow_settings, cli, dags, jobs
from tests.support.prereqs import ROOT


def test_the_checkouts_dag_files_are_what_the_install_command_writes():
    """One fact: the repository's dags/ holds exactly the one-line files ``dlbench dags install``
    writes, so the checkout, Astro's image and an installed package parse the same DAGs."""
    assert sorted(p.name for p in (ROOT / "dags").glob("*.py")) == sorted(dags.DAG_FILES)
    for name in dags.DAG_FILES:
        assert (ROOT / "dags" / name).read_text() == dags.dag_file(name)


def test_dags_install_writes_a_dag_folder_airflow_parses(tmp_path, capsys, airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    folder = tmp_path / "dags"
    assert cli.main(["dags", "install", str(folder)]) == 0
    assert capsys.readouterr().out.count(": written") == len(dags.DAG_FILES)
    assert cli.main(["dags", "install", str(folder)]) == 0  # idempotent: nothing rewritten
    assert capsys.readouterr().out.count(": unchanged") == len(dags.DAG_FILES)
    (folder / "dlbench_janitor.py").write_text("# an old copy\n")
    assert cli.main(["dags", "install", str(folder)]) == 0
    assert "dlbench_janitor.py: replaced" in capsys.readouterr().out

    bag = DagBag(dag_folder=str(folder))
    assert not bag.import_errors
    assert set(bag.dags) == {jobs.BENCHMARK_DAG_ID, "dlbench_janitor"}
    # Airflow keeps each DAG's file as the one-liner in the DAG folder (not the package's module), so
    # it never takes the DAGs for ones whose file went away
    for dag in bag.dags.values():
        assert Path(dag.fileloc).parent == folder
    # the whole DAG, not a stub: the benchmark's tasks and its trigger form
    benchmark = bag.dags[jobs.BENCHMARK_DAG_ID]
    assert {"validate_request", "provision", "run_job", "release", "load", "report", "gates"} <= set(benchmark.task_ids)
    assert "provider" in benchmark.params


def test_each_parse_builds_the_dag_anew_with_the_settings_of_that_parse(tmp_path, monkeypatch):
    """A one-line file imports the package's module once per process, so the DAG is built by a call
    at each parse: the routing read at parse time changes the next parse's queues (as when the DAG
    file held the definition)."""
    from dlbench.dags import benchmark

    first = benchmark.benchmark_dag()
    monkeypatch.setenv("AIRFLOW__DLBENCH__ROUTING", json.dumps({"setup_queue": "cloud-a"}))
    second = benchmark.benchmark_dag()
    assert first is not second
    assert second.get_task("provision").queue == "cloud-a" != first.get_task("provision").queue


def test_the_janitors_schedule_is_a_setting_read_at_each_parse(monkeypatch):
    """The janitor's interval, `[dlbench] janitor_interval_minutes` (what a Helm deployment sets in
    its `config:`, docs/install.md): 30 minutes by default, another at the next parse, a bad value an
    import error naming the option."""
    from dlbench.dags import janitor
    from dlbench.settings import JANITOR_INTERVAL

    monkeypatch.delenv(JANITOR_INTERVAL.env, raising=False)
    assert janitor.janitor_dag().schedule == timedelta(minutes=30)
    monkeypatch.setenv(JANITOR_INTERVAL.env, "10")
    assert janitor.janitor_dag().schedule == timedelta(minutes=10)
    monkeypatch.setenv(JANITOR_INTERVAL.env, "1")
    with pytest.raises(ValueError, match=r"\[dlbench\] janitor_interval_minutes.*from 5 to 1440"):
        janitor.janitor_dag()


def _pool_slots(name: str) -> int:
    from airflow.models.pool import Pool

    pool = Pool.get_pool(name)
    assert pool is not None
    return pool.slots


def _variable(key: str) -> str | None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(select(Variable).where(Variable.key == key)).one_or_none()
        return None if row is None else row.val


def test_airflow_settings_creates_what_is_missing_and_keeps_the_operators_values(airflow_db, capsys):
    from airflow.models.pool import Pool
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    shipped = yaml.safe_load(airflow_settings.PACKAGED.read_text())["airflow"]
    pool = shipped["pools"][0]["pool_name"]
    slots = int(shipped["pools"][0]["pool_slot"])
    expiry = str(next(v["variable_value"] for v in shipped["variables"]
                      if v["variable_name"] == "dlbench_expiry_hours"))
    Pool.create_or_update_pool(pool, slots + 7, "an operator's size", include_deferred=False)
    with create_session() as session:
        session.execute(delete(Variable).where(Variable.key == "dlbench_expiry_hours"))
    try:
        assert cli.main(["airflow-settings"]) == 0
        out = capsys.readouterr().out
        assert "imported 1 variables: dlbench_expiry_hours" in out  # the missing one, created
        assert f"kept {len(shipped['pools'])} pools" in out and pool in out and "--overwrite" in out
        assert _pool_slots(pool) == slots + 7  # the operator's value survived
        assert _variable("dlbench_expiry_hours") == expiry
        assert cli.main(["airflow-settings"]) == 0  # idempotent: nothing more to write
        assert "imported" not in capsys.readouterr().out
    finally:  # the file's values back: this stream's later DAG tests use the pool as shipped
        assert cli.main(["airflow-settings", "--overwrite"]) == 0
    out = capsys.readouterr().out
    assert _pool_slots(pool) == slots and "kept" not in out and f"imported {len(shipped['pools'])} pools" in out
    # what the form's runs read through Airflow's own connection lookup
    from airflow.models.connection import Connection

    conn = Connection.get_connection_from_secrets("dlbench_warehouse")
    assert conn.conn_type == shipped["connections"][0]["conn_type"]


def test_the_wheel_carries_the_dags_the_settings_and_the_plugins_entry_point(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, text=True, timeout=600)
    (wheel,) = tmp_path.glob("dlbench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"dlbench/dags/benchmark.py", "dlbench/dags/janitor.py", "dlbench/ui/plugin.py",
            "dlbench/airflow_settings.yaml"} <= names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[airflow.plugins]" in text and "dlbench_reports = dlbench.ui.plugin:DlbenchReportsPlugin" in text
    # `pip install 'dlbench[airflow]'` brings the controller's pinned set: requirements.txt, read at
    # build time (one list for the image, Astro and a plain pip install)
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    wanted = {line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    extra = {line.removeprefix("Requires-Dist: ").split(";")[0].strip()
             for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
             if line.startswith("Requires-Dist:") and 'extra == "airflow"' in line}
    assert extra == wanted, extra ^ wanted


def test_the_helm_values_name_only_settings_dlbench_reads():
    """deploy/helm/values.yaml is not run here (no real kubelet): what is checked offline is that it
    parses and that every dlbench setting it sets is one the product reads (docs/settings.md), in the
    form Airflow maps onto it (AIRFLOW_VAR_<name>, AIRFLOW_CONN_<id>, [dlbench] options)."""
    from dlbench import settings

    values = yaml.safe_load((ROOT / "deploy" / "helm" / "values.yaml").read_text())
    assert values["images"]["airflow"]["repository"] and values["executor"] == "CeleryExecutor"
    assert values["airflowVersion"] == next(line.split("==")[1] for line in (ROOT / "requirements.txt").read_text()
                                            .splitlines() if line.startswith("apache-airflow=="))
    known = set(settings.declared(settings.Kind.ENV))
    known |= {f"AIRFLOW_VAR_{key.upper()}" for key in settings.declared(settings.Kind.VARIABLE)}
    known |= {f"AIRFLOW_CONN_{key.upper()}" for key in settings.declared(settings.Kind.CONNECTION)}
    named = [e["name"] for e in values["env"]] + [s["envName"] for s in values["secret"]]
    assert named and not [n for n in named if n not in known], named
    options = {f"[dlbench] {key}" for key in values["config"]["dlbench"]}
    assert options <= set(settings.declared(settings.Kind.CONFIG)), options
