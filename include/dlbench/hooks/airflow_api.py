"""Airflow's public REST API (v2), as the janitor calls it to mark a dead run's DAG run failed.

Why the REST API: an Airflow 3 task has no metadata-database session, and the Task SDK's
Execution API lets a task read another DAG run's state (``get_dagrun_state``) but not change it.
``PATCH /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}`` is the supported way; it needs a user of the
deployment's auth manager who may edit DAG runs: a token from ``POST /auth/token`` (the simple and
the FAB auth managers both serve it) with the login and password of the Airflow connection
``dlbench_airflow_api`` (:data:`dlbench.settings.AIRFLOW_API`), or a token kept in its extra.
Credentials are never logged; only the API's URL is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from dlbench import settings

FAILED = "failed"
SKIPPED = "skipped"
UNFINISHED_RUN = frozenset({"queued", "running"})
FINISHED_TASK = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
TASK_INSTANCES_PAGE = 100
"""Task instances per request: Airflow's default ``[api] maximum_page_limit``."""
REQUEST_TIMEOUT_S = 30.0
"""Per request: a hung API server must not hold the janitor's task."""


@dataclass(frozen=True)
class ApiConnection:
    """Where Airflow's REST API is and how to log in (:data:`dlbench.settings.AIRFLOW_API`); secrets never printed."""

    url: str
    login: str = ""
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)


def api_connection() -> ApiConnection | None:
    """The connection ``dlbench_airflow_api`` (None when it is not defined). ``host`` may be a whole
    URL (``http://airflow:8080``) or a host name with ``schema`` (http/https) and ``port``."""
    from airflow.sdk import BaseHook  # why: the janitor's task only; this module is imported without Airflow

    try:
        conn = BaseHook.get_connection(settings.AIRFLOW_API.name)
    except Exception:  # noqa: BLE001 - not defined: the janitor says so and marks nothing
        return None
    host = (conn.host or "").strip()
    if not host:
        return None
    if "://" not in host:
        scheme = conn.schema if conn.schema in ("http", "https") else "http"
        host = f"{scheme}://{host}" + (f":{conn.port}" if conn.port else "")
    extra = conn.extra_dejson or {}
    return ApiConnection(url=host.rstrip("/"), login=conn.login or "", password=conn.password or "",
                         token=str(extra.get("token") or ""))


class AirflowApi:
    """One deployment's REST API, logged in on first use."""

    def __init__(self, conn: ApiConnection, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.conn = conn
        self.url = conn.url
        self.timeout = timeout
        self._token = conn.token

    def __repr__(self) -> str:
        return f"AirflowApi(url={self.url!r})"

    @classmethod
    def from_connection(cls) -> AirflowApi | None:
        """The API of the connection ``dlbench_airflow_api``; None when it is not defined."""
        conn = api_connection()
        return cls(conn) if conn is not None else None

    def _headers(self) -> dict[str, str]:
        if not self._token:
            resp = httpx.post(f"{self.url}/auth/token", json={"username": self.conn.login,
                                                              "password": self.conn.password}, timeout=self.timeout)
            if resp.status_code >= 400:
                raise RuntimeError(f"{self.url}/auth/token refused user {self.conn.login!r} of connection "
                                   f"{settings.AIRFLOW_API.name}: HTTP {resp.status_code} {resp.text[:300]}")
            self._token = str(resp.json()["access_token"])
        return {"Authorization": f"Bearer {self._token}"}

    def _run_path(self, dag_id: str, dag_run_id: str) -> str:
        # Run ids carry ':' and '+' (manual__2026-01-01T00:00:00+00:00): quoted whole.
        return f"{self.url}/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(dag_run_id, safe='')}"

    def dag_run_state(self, dag_id: str, dag_run_id: str) -> str:
        """The DAG run's state as the API reports it (``running``, ``failed``...)."""
        resp = httpx.get(self._run_path(dag_id, dag_run_id), headers=self._headers(), timeout=self.timeout)
        resp.raise_for_status()
        return str(resp.json()["state"])

    def _patch(self, url: str, body: dict[str, Any], mask: tuple[str, ...]) -> dict[str, Any]:
        resp = httpx.patch(url, params=[("update_mask", m) for m in mask], json=body, headers=self._headers(),
                           timeout=self.timeout)
        if resp.status_code >= 400:
            raise RuntimeError(f"PATCH {url}: HTTP {resp.status_code} {resp.text[:300]}")
        return dict(resp.json())

    def _task_instances(self, dag_id: str, dag_run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, page by page (the API caps a page: ``[api] maximum_page_limit``)."""
        url = f"{self._run_path(dag_id, dag_run_id)}/taskInstances"
        found: list[dict[str, Any]] = []
        while True:
            resp = httpx.get(url, params={"limit": TASK_INSTANCES_PAGE, "offset": len(found)},
                             headers=self._headers(), timeout=self.timeout)
            resp.raise_for_status()
            page = resp.json()
            found += page["task_instances"]
            if not page["task_instances"] or len(found) >= int(page["total_entries"]):
                return found

    def mark_failed(self, dag_id: str, dag_run_id: str, note: str) -> str:
        """End the DAG run failed, with ``note`` (at most 1000 characters); the state the API then
        reports. Airflow's own rule fails its running tasks and skips its pending ones, but keeps a
        run whose teardown has not run ``running`` for the scheduler to run that teardown; no
        scheduler ever drives a dead ``dag.test()`` run, and the caller (the janitor) has already
        done the teardown's work (released by tag), so its unfinished tasks are then marked
        skipped with the note and the run is failed again."""
        run_url = self._run_path(dag_id, dag_run_id)
        body = {"state": FAILED, "note": note[:1000]}
        state = str(self._patch(run_url, body, ("state", "note"))["state"])
        if state in UNFINISHED_RUN:
            for ti in self._task_instances(dag_id, dag_run_id):
                if ti.get("state") in FINISHED_TASK:
                    continue
                index = ti.get("map_index", -1)
                url = f"{run_url}/taskInstances/{quote(str(ti['task_id']), safe='')}" + (
                    f"/{index}" if isinstance(index, int) and index >= 0 else "")
                self._patch(url, {"new_state": SKIPPED, "note": f"Not run: {note}"[:1000]}, ("new_state", "note"))
            state = str(self._patch(run_url, {"state": FAILED}, ("state",))["state"])
        return state
