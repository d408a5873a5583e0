"""The multi-worker Airflow cluster tier's shared parts: the DAG, its routing and queues, and the
REST API v2 as a user calls it."""

from __future__ import annotations

import time

import httpx

DAG_ID = "dlbench_benchmark"

# Queues that match the hardware (docs/scaling.md): the local provider's jobs go to queue "near",
# served by worker-a and worker-b only ("next to the machines"); worker-c serves the default queue.
ROUTING = {"routes": [{"name": "near", "providers": ["local"], "queue": "near"}]}
JOB_TASK = "run_job__near"
WORKER_QUEUES = ["default,near", "default,near", "default"]
NEAR_WORKERS = ("worker-a", "worker-b")

# Zombie detection within seconds instead of minutes (defaults: 300 s timeout).
FAST_DETECTION = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "3",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
}


class Api:
    """The REST API v2 as a user calls it: a JWT from /auth/token, then Bearer requests."""

    def __init__(self, url: str, user: str, password: str, alive=lambda: None) -> None:
        self.alive = alive  # raises when a control process (scheduler, api-server...) died
        token = httpx.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
        token.raise_for_status()
        self.client = httpx.Client(base_url=url, timeout=30,
                                   headers={"Authorization": f"Bearer {token.json()['access_token']}"})

    def get(self, path: str, **params: object) -> dict:
        resp = self.client.get(path, params=params)
        resp.raise_for_status()
        return resp.json()

    def send(self, method: str, path: str, body: dict) -> dict:
        resp = self.client.request(method, path, json=body)
        if resp.status_code >= 400:
            raise AssertionError(f"{method} {path}: {resp.status_code} {resp.text[:2000]}")
        return resp.json()

    def wait_dag(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.client.get(f"/api/v2/dags/{DAG_ID}").status_code == 200:
                return
            self.alive()
            time.sleep(1)
        raise AssertionError(f"{DAG_ID} not parsed within {timeout:.0f} s")

    def trigger(self, conf: dict) -> str:
        self.send("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
        return self.send("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": conf})["dag_run_id"]

    def run_state(self, run_id: str) -> str:
        return self.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}")["state"]

    def task_instances(self, run_id: str) -> list[dict]:
        return self.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", limit=500)["task_instances"]

    def tries(self, run_id: str, task_id: str, map_index: int) -> list[dict]:
        return self.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/{map_index}/tries")[
            "task_instances"]

    def wait_run(self, run_id: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.run_state(run_id)
            if state in ("success", "failed"):
                return state
            self.alive()
            time.sleep(2)
        raise AssertionError(f"run {run_id} not finished within {timeout:.0f} s: "
                             f"{[(t['task_id'], t['map_index'], t['state']) for t in self.task_instances(run_id)]}")
