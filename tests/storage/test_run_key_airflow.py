"""Inside Airflow (dag.test(): real task runner, metadata DB, XCom): the run's key is an Airflow
Variable set by the setup task, a 0600 file only while a job task runs, registered with Airflow's
secrets masker, never in XCom or the logs, and deleted at release."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from dlbench.providers import run_secrets
from dlbench.providers.machines import generate_key

RUN = "airflow-key-run"

DAG_SOURCE = f"""
import logging, os, stat
from datetime import datetime

from airflow.sdk import DAG, task

from dlbench.providers import run_secrets

RUN = {RUN!r}

with DAG("dlbench_test_run_key", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    @task
    def setup() -> str:
        assert run_secrets.backend() == "airflow"
        return run_secrets.put_secret(RUN, run_secrets.SSH_KEY, os.environ["DLBENCH_TEST_KEY"])

    @task
    def job(ref: str) -> str:
        private = os.environ["DLBENCH_TEST_KEY"]
        run_id, name = run_secrets.parse_ref(ref)
        with run_secrets.secret_file(run_id, name) as path:
            mode = stat.S_IMODE(path.stat().st_mode)
            same = path.read_text() == private
            logging.getLogger("dlbench.test").info("job holds the key at %s", path)
        with open(os.environ["DLBENCH_TEST_RECORD"], "w") as out:
            out.write(f"{{path}}\\n{{mode:o}}\\n{{same}}\\n{{path.exists()}}\\n")
        return "done"

    @task
    def release() -> list:
        return run_secrets.delete_secrets(RUN)

    job(setup()) >> release()
"""


def test_the_run_key_is_a_variable_between_tasks_and_a_file_only_during_one(airflow_db, tmp_path, monkeypatch,
                                                                           caplog, capfd):
    from sqlalchemy import select

    monkeypatch.setenv("DLBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DLBENCH_SECRETS", raising=False)
    private, _ = generate_key()
    body = private.splitlines()[3]  # a line of the key's base64 body (line 1 is the same in every key)
    record = tmp_path / "seen"

    dag_file = tmp_path / "dags" / "run_key_dag.py"
    dag_file.parent.mkdir()
    dag_file.write_text(DAG_SOURCE)
    monkeypatch.setenv("DLBENCH_TEST_KEY", private)
    monkeypatch.setenv("DLBENCH_TEST_RECORD", str(record))
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()

    bag = DagBag(dag_folder=str(dag_file.parent))
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, "dags-folder", None)  # dag.test() runs serialized DAGs only
    dag = bag.dags["dlbench_test_run_key"]

    # Every record of dlbench's loggers (the task's own line, run_secrets' and the executors'
    # logs) at DEBUG, through a handler of our own: what Airflow's logging configuration does with
    # stdlib records (levels, handlers) depends on what configured it first in this process (in CI
    # the INFO lines never reached stdout), and the check below must not depend on it.
    seen, ours = io.StringIO(), logging.getLogger("dlbench")
    handler, level = logging.StreamHandler(seen), ours.level
    handler.setLevel(logging.DEBUG)
    ours.addHandler(handler)
    ours.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG):
            run = dag.test()
    finally:
        ours.removeHandler(handler)
        ours.setLevel(level)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert all(s.endswith("success") for s in states.values()), states
    path, mode, same, existed_after = record.read_text().split("\n")[:4]
    assert mode == "600" and same == "True" and existed_after == "False" and not Path(path).exists()

    from airflow.models import Variable
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        keys = session.scalars(select(Variable.key).where(  # this run's: other tests' runs are theirs
            Variable.key.like(f"{run_secrets.PREFIX}{RUN}__%"))).all()
        xcoms = [str(v) for v in session.scalars(select(XComModel.value).where(
            XComModel.dag_id == "dlbench_test_run_key"))]
    assert keys == []  # deleted at release
    assert xcoms and not any(body in v or "PRIVATE KEY" in v for v in xcoms)
    out, err = capfd.readouterr()
    logs = seen.getvalue() + caplog.text + out + err
    assert "job holds the key at" in seen.getvalue()  # the task's own log lines are here
    assert body not in logs and "PRIVATE KEY" not in logs


def test_a_secret_is_registered_with_the_airflow_secrets_masker(monkeypatch):
    """On real workers the supervisor redacts task logs with this masker (``dag.test()`` prints
    unredacted to the console, so this is checked here): the key and each line of it."""
    from airflow.sdk.log import redact

    monkeypatch.setenv("DLBENCH_SECRETS", "memory")
    private, _ = generate_key()
    run_secrets.put_secret("masked-run", run_secrets.SSH_KEY, private)
    try:
        line = private.splitlines()[3]
        assert redact(f"key: {private}") == "key: ***"
        assert line not in redact(f"a line of it: {line}")
    finally:
        run_secrets.delete_secrets("masked-run")
