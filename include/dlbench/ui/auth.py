"""Who may use the explorer inside Airflow: the same login and permissions as Airflow's UI and REST API.

The plugin mounts the explorer in Airflow's API server, where anyone who reaches the port would
otherwise read every result and move the regression baseline. So every route asks Airflow's own
security dependencies (``airflow.api_fastapi.core_api.security``), not a login of ours: the user
comes from a JWT (``Authorization: Bearer``, from ``POST /auth/token``) or from the UI's ``_token``
cookie (which Airflow's ``JWTRefreshMiddleware`` on the root app validates and refreshes, so the
page opened from Airflow's menu works in the browser), and the permission is decided by whichever
auth manager the deployment configured (simple, FAB, Keycloak...). No credential: 401; a user
without the permission: 403 (Airflow's own answers).

The permission is that of the DAG whose runs fill the warehouse: reading the explorer is reading
that DAG's results (DAG read, ``GET``); pinning a baseline changes how that DAG's regression step
judges its next runs (DAG edit, ``PUT``, as pausing or editing the DAG needs).

Standalone (``dlbench explorer``, tests, scripts) has no Airflow and so no login: it is a
local tool bound to 127.0.0.1 by default, for someone who can read the warehouse anyway.
docs/explorer.md "Access control".
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from dlbench.jobs import BENCHMARK_DAG_ID

# The DAG whose permissions are the explorer's: its runs are what the explorer shows, and its
# regression step reads the pinned baseline.


def read_access(airflow: bool) -> list[Any]:
    """Dependencies every route carries: inside Airflow, an authenticated user who may read
    :data:`BENCHMARK_DAG_ID`; standalone, none."""
    return _requires(airflow, "GET")


def edit_access(airflow: bool) -> list[Any]:
    """Dependencies of the one write (the baseline pin): inside Airflow, a user who may edit
    :data:`BENCHMARK_DAG_ID`; standalone, none."""
    return _requires(airflow, "PUT")


def _requires(airflow: bool, method: Literal["GET", "PUT"]) -> list[Any]:
    if not airflow:
        return []

    async def airflow_user_may(request: Request) -> None:
        """Airflow's ``get_user`` (Bearer JWT first, else the ``_token`` cookie the root app's
        middleware validated) then ``requires_access_dag``: their 401/403, their auth manager."""
        # Airflow's API server code, imported on the first request and not when the app is built:
        # every task process imports this plugin too (Airflow loads plugins for macros), where it
        # would add 0.7 s and Airflow's ORM models for nothing (measured, docs/explorer.md).
        from airflow.api_fastapi.core_api.security import bearer_scheme, get_user, requires_access_dag

        user = await get_user(request=request, _oauth_token=None, bearer_credentials=await bearer_scheme(request))
        # Synchronous (it asks the metadata DB for the DAG's team): off the event loop, as FastAPI would.
        await run_in_threadpool(requires_access_dag(method, param_dag_id=BENCHMARK_DAG_ID), request, user)

    return [Depends(airflow_user_may)]
