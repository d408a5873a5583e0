"""Access control of the explorer, against a real ``airflow api-server`` with the plugin loaded.

One server (module-scoped) with the simple auth manager and four users, one per permission level
it can express: ``admin`` (ADMIN), ``editor`` (USER: may edit DAGs), ``viewer`` (VIEWER: may read
DAGs), ``nobody`` (no role: authenticated, may do nothing). Every route of the app, taken from the
app itself so a new route is covered the day it is added, is asked without credentials (401),
by a user without the permission (403) and by one with it (200), with a Bearer token from
``POST /auth/token`` and with the UI's ``_token`` cookie; Airflow's own ``/api/v2/dags`` is asked
the same way as the reference. Nothing to skip: it needs only this virtualenv.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from dlbench import jobs
from dlbench.ui.app import create_app
from dlbench.warehouse import db
from tests.support.airflow_api_server import api_server
from tests.support.prereqs import ROOT, require
from tests.ui.cdp import Browser, chromium_binary
from tools.ui_history import generate_history

USERS = {"admin": "admin", "editor": "user", "viewer": "viewer", "nobody": ""}
REPORT_RUN = "manual-2026-11-25"
PATH_PARAMS = {"run_id": REPORT_RUN, "name": "report.html"}


@dataclass
class Server:
    url: str
    tokens: dict[str, str]
    runs: list[str]
    log: Path

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def server(airflow_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``airflow api-server`` on a free 127.0.0.1 port: its own AIRFLOW_HOME (config, users,
    passwords) on the session's migrated metadata DB (a fresh `airflow db migrate` would add half a
    minute for tables the check only reads: the DAG's team), the plugin from plugins/, a warehouse
    with two generated runs and one written report."""
    base = tmp_path_factory.mktemp("auth")
    warehouse = f"sqlite:///{base / 'warehouse.db'}"
    engine = db.upgrade(db.engine_for(warehouse))
    runs = generate_history(engine, runs=2, seed=5)
    engine.dispose()
    report = base / "dlbench" / "reports" / REPORT_RUN / "report.html"
    report.parent.mkdir(parents=True)
    report.write_text("<h1>written by the report task</h1>")
    extra = {"AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"), "DLBENCH_HOME": str(base / "dlbench"),
             "DLBENCH_STORAGE_URL": (base / "dlbench").as_uri(), "DLBENCH_WAREHOUSE_URL": warehouse}
    with api_server(base, airflow_db, USERS, env=extra, drop_env_prefixes=("AIRFLOW__", "DLBENCH_")) as running:
        tokens = {}
        for user, password in running.passwords.items():
            resp = httpx.post(f"{running.url}/auth/token", json={"username": user, "password": password}, timeout=30)
            assert resp.status_code == 201, (user, resp.status_code, resp.text)
            tokens[user] = resp.json()["access_token"]
        yield Server(url=running.url, tokens=tokens, runs=runs, log=running.log)


def _routes() -> list[tuple[str, str]]:
    """(method, path with its parameters filled) of every route the app serves, from the app."""
    out = []
    for route in create_app(airflow=True).routes:
        assert isinstance(route, APIRoute), f"{route}: a route that is not an API route carries no dependency"
        for method in sorted(route.methods):
            out.append((method, route.path.format(**PATH_PARAMS)))
    return out


def _call(server: Server, method: str, path: str, body: dict | None = None, *, token: str | None = None,
          cookie: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=server.url, timeout=60, cookies={"_token": cookie} if cookie else None) as client:
        return client.request(method, path, json=body, headers=headers)


def test_the_checked_dag_is_the_benchmark_dag():
    from dlbench.dags import benchmark

    assert benchmark.benchmark_dag().dag_id == jobs.BENCHMARK_DAG_ID


def test_every_route_needs_an_airflow_user_with_the_permission(server: Server):
    routes = _routes()
    writes = [(m, p) for m, p in routes if m != "GET"]
    assert ("POST", "/api/pins") in writes and len(routes) >= 9, routes
    assert writes == [("POST", "/api/pins")], f"a new write: give it auth.edit_access and a body here: {writes}"
    pin = {"run_id": server.runs[-1], "note": "auth test"}

    def ask(method: str, path: str, **creds: str) -> int:
        return _call(server, method, "/dlbench" + path, pin if method == "POST" else None, **creds).status_code

    # Airflow's own API, the reference: the same answers for the same credentials.
    assert _call(server, "GET", "/api/v2/dags").status_code == 401
    assert _call(server, "GET", "/api/v2/dags", token=server.tokens["nobody"]).status_code == 403
    assert _call(server, "GET", "/api/v2/dags", token=server.tokens["viewer"]).status_code == 200

    answers = {(m, p): ask(m, p) for m, p in routes}
    assert set(answers.values()) == {401}, answers
    answers = {(m, p): ask(m, p, token="not-a-jwt") for m, p in routes}
    assert set(answers.values()) == {_call(server, "GET", "/api/v2/dags", token="not-a-jwt").status_code}, answers
    answers = {(m, p): ask(m, p, token=server.tokens["nobody"]) for m, p in routes}
    assert set(answers.values()) == {403}, answers
    # The viewer reads everything and may not pin; the refused write wrote nothing.
    answers = {(m, p): ask(m, p, token=server.tokens["viewer"]) for m, p in routes}
    assert answers == {(m, p): 403 if m == "POST" else 200 for m, p in routes}, (answers, server.tail())
    assert _call(server, "GET", "/dlbench/api/pins", token=server.tokens["viewer"]).json() == []
    # DAG edit (USER role) is enough to pin; admin may do everything; the write happened.
    for user in ("editor", "admin"):
        answers = {(m, p): ask(m, p, token=server.tokens[user]) for m, p in routes}
        assert set(answers.values()) == {200}, (user, answers, server.tail())
    pins = _call(server, "GET", "/dlbench/api/pins", token=server.tokens["viewer"]).json()
    assert [(p["run_id"], p["note"]) for p in pins] == [(server.runs[-1], "auth test")]
    # What the routes return once let in is what they serve.
    page = _call(server, "GET", "/dlbench/", token=server.tokens["viewer"])
    assert "dlbench results explorer" in page.text
    report = _call(server, "GET", f"/dlbench/runs/{REPORT_RUN}/report.html", token=server.tokens["viewer"])
    assert "written by the report task" in report.text
    options = _call(server, "GET", "/dlbench/api/options", token=server.tokens["viewer"]).json()
    assert {r["run_id"] for r in options["runs"]} == set(server.runs)


def test_the_ui_cookie_lets_the_page_and_its_requests_in(server: Server):
    """The page opened from Airflow's menu: the browser sends the UI's ``_token`` cookie, not a
    header, with the page and with every request its script makes (same origin)."""
    routes = _routes()
    pin = {"run_id": server.runs[0], "suite": "tf_cnn"}
    answers = {(m, p): _call(server, m, "/dlbench" + p, pin if m == "POST" else None,
                             cookie=server.tokens["viewer"]).status_code for m, p in routes}
    assert answers == {(m, p): 403 if m == "POST" else 200 for m, p in routes}, answers
    answers = {(m, p): _call(server, m, "/dlbench" + p, pin if m == "POST" else None,
                             cookie=server.tokens["editor"]).status_code for m, p in routes}
    assert set(answers.values()) == {200}, answers
    assert _call(server, "GET", "/dlbench/", cookie="expired-or-forged").status_code in (401, 403)


def test_no_unauthenticated_schema_or_docs(server: Server):
    """FastAPI's own pages are no API routes and carry no dependency: inside Airflow they are off."""
    for path in ("/dlbench/openapi.json", "/dlbench/docs", "/dlbench/redoc"):
        assert _call(server, "GET", path).status_code == 404, path
        assert _call(server, "GET", path, token=server.tokens["admin"]).status_code == 404, path


def test_the_page_works_in_a_browser_with_the_ui_login(server: Server):
    """Chromium with the cookie Airflow's login sets (``_token``, HttpOnly, SameSite=Lax): the page
    loads, its own script's requests get in (no failed load), and a request from the page's
    context is let in or refused by the user's permission; without the cookie, 401."""
    binary = chromium_binary()
    require(binary is not None, "chromium is not installed (Debian: apt-get install chromium; make prereqs)")
    assert binary is not None
    browser = Browser(binary)
    try:
        browser.call("Page.navigate", url=f"{server.url}/dlbench/")
        browser.wait_for("document.readyState === 'complete' && document.body.innerText.length > 0")
        assert "Not authenticated" in browser.evaluate("document.body.innerText")
        browser.events.clear()
        browser.call("Network.setCookie", name="_token", value=server.tokens["viewer"], url=f"{server.url}/",
                     path="/", httpOnly=True, sameSite="Lax")
        browser.call("Page.navigate", url=f"{server.url}/dlbench/")
        browser.wait_for("document.title === 'dlbench results explorer'")
        # Until the page's own requests have settled (the same number of them for a second).
        settled, last, deadline = 0, -1, time.monotonic() + 60
        while settled < 10 and time.monotonic() < deadline:
            count = browser.evaluate("performance.getEntriesByType('resource').length")
            settled, last = (settled + 1, count) if count == last else (0, count)
            time.sleep(0.1)
        loads = browser.evaluate("performance.getEntriesByType('resource').map(e => [e.name, e.responseStatus])")
        assert any("/dlbench/api/" in url for url, _ in loads) and {code for _, code in loads} == {200}, loads
        assert browser.errors() == [], browser.errors()
        status = ("(async () => (await fetch(%s, {method: %s, headers: {'Content-Type': 'application/json'}, "
                  "body: %s})).status)()")
        assert browser.evaluate(status % ("'api/options'", "'GET'", "undefined")) == 200
        pin = json.dumps(json.dumps({"run_id": server.runs[0]}))
        assert browser.evaluate(status % ("'api/pins'", "'POST'", pin)) == 403
    finally:
        browser.close()
