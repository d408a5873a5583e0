"""The results explorer and report browser: a FastAPI app served inside the Airflow UI (the plugin).

- ``/``: the explorer page (filters, normalized comparison with verdicts, trend with change
  points, capacity view, pinned baselines) and the list of written reports.
- ``/api/options|comparison|trend|capacity|pins``: JSON (with the chart as inline SVG and the
  table as an HTML fragment, so the page's script only swaps them in).
- ``/runs/<run_id>/<file>``: the report files the DAG's report task wrote.

Queries are read-only, parameterised SQLAlchemy selects (:mod:`dlbench.ui.explorer`); the one
write is pinning a regression baseline (``POST api/pins``), a row in ``baseline_pins``. Links are
relative, so the app works under any prefix (Airflow mounts it at ``/dlbench``). The warehouse:
``DLBENCH_WAREHOUSE_URL``, else the Airflow connection ``dlbench_warehouse``, else SQLite in
``$DLBENCH_HOME`` (the DAG's precedence: :func:`dlbench.settings.warehouse_location`). docs/explorer.md.
"""

from __future__ import annotations

import html
import logging
import mimetypes
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, Response
from pydantic import BaseModel
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from dlbench import settings, storage
from dlbench.reports import capacity as cap
from dlbench.reports import regression
from dlbench.reports.charts import bar_chart, line_chart
from dlbench.ui import auth, explorer
from dlbench.ui.page import PAGE

_RUN_ID = re.compile(r"^[A-Za-z0-9_.:+-]{1,120}$")
_FILE = re.compile(r"^[A-Za-z0-9_.-]{1,120}\.(html|png|csv|json|txt|svg)$")
_NAME = re.compile(r"^[A-Za-z0-9_. +#=/%()-]{1,200}$")


def _reports() -> list[tuple[str, datetime, str]]:
    """(run id, written at, key of its report.html) of every report in the shared store
    (:mod:`dlbench.storage`: the store the report task wrote to), newest first."""
    store = storage.store()
    found = []
    for run in store.children("reports"):
        key = f"reports/{run}/report.html"
        if _RUN_ID.match(run) and store.exists(key):
            when = store.modified(key)
            found.append((run, datetime.fromtimestamp(when or 0, UTC), key))
    return sorted(found, key=lambda item: item[1], reverse=True)


def default_engine() -> Engine:
    """The warehouse by the DAG's precedence, migrated when this role may (a fresh deployment
    shows an empty explorer)."""
    from dlbench.warehouse import db  # heavy: Alembic, only when the app opens the default warehouse itself

    try:
        url, _ = settings.warehouse_location()
    except ImportError:  # no Airflow here and no DLBENCH_WAREHOUSE_URL: the embedded SQLite file
        url = None
    engine = db.engine_for(url)
    try:
        return db.upgrade(engine)
    except SQLAlchemyError as exc:  # e.g. a read-only role for the UI: the DAG's loads migrate anyway
        logging.getLogger(__name__).warning("explorer: warehouse not migrated (%s); reading it as it is", exc)
        return engine


def _check(value: str | None, pattern: re.Pattern[str] = _NAME) -> str | None:
    if value in (None, ""):
        return None
    if not pattern.match(value):
        raise HTTPException(status_code=422, detail=f"invalid value {value[:40]!r}")
    return value


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise HTTPException(status_code=422, detail=f"not an ISO date: {value[:40]!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return html.escape(str(v))


def _table(headers: list[str], rows: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>'
            f'{body or "<tr><td colspan=99>no data for this selection</td></tr>"}</tbody></table>')


def _dag_run_links(runs: list[dict[str, Any]]) -> str:
    """Links to the Airflow UI's DAG run pages, relative to the plugin's mount (``/dlbench/``)."""
    return ", ".join(f'<a class="dagrun" href="../dags/{quote(r["dag_id"], safe="")}/runs/'
                     f'{quote(r["dag_run_id"], safe="")}">{html.escape(r["run_id"])}</a>' for r in runs)


class PinRequest(BaseModel):
    run_id: str
    suite: str | None = None
    note: str | None = None
    remove: bool = False


def create_app(engine: Engine | Callable[[], Engine] | None = None, *, airflow: bool = False) -> FastAPI:
    """The app; ``engine`` (or a factory) defaults to :func:`default_engine`, opened on first use.
    ``airflow``: running inside Airflow (the plugin), so Airflow Variables can be read."""
    app = FastAPI(title="dlbench explorer", description="Benchmark results explorer and reports",
                  # Inside Airflow: every route needs an Airflow user who may read the DAG (auth.py), and
                  # no schema or docs page answers without one.
                  dependencies=auth.read_access(airflow), openapi_url=None if airflow else "/openapi.json")
    holder: dict[str, Engine] = {}

    def warehouse() -> Engine:
        if "engine" not in holder:
            if isinstance(engine, Engine):
                holder["engine"] = engine
            else:
                holder["engine"] = (engine or default_engine)()
        return holder["engine"]

    def filters(runs: list[str], since: str | None, until: str | None, suite: str | None, model: str | None,
                data: str | None, scenario: str | None, platforms: list[str], metric: str | None,
                scheduled_only: bool = False) -> explorer.Filters:
        return explorer.Filters(
            runs=[r for r in (_check(r, _RUN_ID) for r in runs) if r], since=_date(since), until=_date(until),
            scheduled_only=scheduled_only, suite=_check(suite) or "tf_cnn", model=_check(model), data=_check(data),
            scenario=_check(scenario), platforms=[p for p in (_check(p) for p in platforms) if p],
            metric=_check(metric))

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        rows = "".join(
            f'<tr><td><a href="runs/{html.escape(run)}/report.html">{html.escape(run)}</a></td>'
            f"<td>{when:%Y-%m-%d %H:%M} UTC</td></tr>"
            for run, when, _ in _reports()
        ) or '<tr><td colspan="2">No report yet: trigger the dlbench_benchmark DAG.</td></tr>'
        return PAGE.replace("{{REPORT_ROWS}}", rows)

    @app.get("/api/reports")
    def list_reports() -> list[dict[str, str]]:
        return [{"run_id": run, "written_at": when.isoformat(), "url": f"runs/{run}/report.html"}
                for run, when, _ in _reports()]

    @app.get("/api/options")
    def options() -> dict[str, Any]:
        return explorer.options(warehouse())

    @app.get("/api/comparison")
    def comparison(runs: list[str] = Query(default=[]), since: str | None = None, until: str | None = None,
                   suite: str | None = None, model: str | None = None, data: str | None = None,
                   scenario: str | None = None, platforms: list[str] = Query(default=[]),
                   metric: str | None = None) -> dict[str, Any]:
        f = filters(runs, since, until, suite, model, data, scenario, platforms, metric,
                    scheduled_only=bool(since or until) and not runs)
        rows = explorer.comparison(warehouse(), f)
        table = _table(["Case", "Metric", "Platform", "n", "Mean", "Std", "Normalized", "95 % CI", "Verdict"], [
            [html.escape(r["case"]), html.escape(r["metric"]), html.escape(r["platform"]), str(r["n"]),
             f'{_fmt(r["mean"])} {html.escape(r["unit"])}', _fmt(r["std"]), _fmt(r["normalized"], 3),
             "-" if r["ci_low"] is None else f'{r["ci_low"]:.3f} .. {r["ci_high"]:.3f}',
             f'<span class="verdict {html.escape(r["verdict"])}">{html.escape(r["verdict"].replace("_", " "))}</span>']
            for r in rows], "comparison-table")
        groups = list(dict.fromkeys(f'{r["case"]} {r["metric"]}' for r in rows if r["normalized"] is not None))
        platforms = list(dict.fromkeys(r["platform"] for r in rows if r["normalized"] is not None))
        value = {(f'{r["case"]} {r["metric"]}', r["platform"]): r["normalized"] for r in rows}
        chart = bar_chart(groups, {p: [value.get((g, p)) for g in groups] for p in platforms}, reference=1.0,
                          y_label="normalized to bare metal", title="normalized comparison (bare metal = 1.0)",
                          chart_id="comparison-chart")
        return {"runs": f.runs, "rows": rows, "table": table, "svg": chart,
                "links": _dag_run_links(explorer.dag_runs(warehouse(), f.runs))}

    @app.get("/api/trend")
    def trend(runs: list[str] = Query(default=[]), since: str | None = None, until: str | None = None,
              suite: str | None = None, model: str | None = None, data: str | None = None,
              scenario: str | None = None, platforms: list[str] = Query(default=[]), metric: str | None = None,
              case: str | None = None) -> dict[str, Any]:
        f = filters(runs, since, until, suite, model, data, scenario, platforms, metric)
        result = explorer.trend(warehouse(), f, _check(case))
        names = [r["started_at"][:10] or r["run_id"] for r in result["runs"]]
        result["svg"] = line_chart(result["series"], marks=result["change_points"], x_names=names,
                                   y_label=f'{result["metric"]} ({result["unit"]})', x_label="run",
                                   title=f'trend: {result["case"] or "-"}', chart_id="trend-chart", width=860)
        result["links"] = _dag_run_links(explorer.dag_runs(warehouse(), [r["run_id"] for r in result["runs"]]))
        return result

    @app.get("/api/capacity")
    def capacity(hardware: str | None = None, runs: list[str] = Query(default=[]), model: str | None = None,
                 data: str | None = None) -> dict[str, Any]:
        f = filters(runs, None, None, "tf_cnn", model, data, None, [], None)
        result = explorer.capacity(warehouse(), _check(hardware), f, prices=cap.load_prices(airflow=airflow))
        rows = [cap.CapacityRow(**r) for r in result["rows"]]
        result["table"] = _table(
            ["Platform", "Instances per host", "Per instance (images/s)", "Degradation %", "Per host (images/s)",
             "Cost per 1000 images", "Runs"],
            [[html.escape(r.platform), str(r.instances_per_host), _fmt(r.per_instance), _fmt(r.degradation_pct, 3),
              _fmt(r.per_host), "-" if r.cost_per_1000 is None else f"{r.cost_per_1000:.4g} {r.currency or ''}",
              str(r.runs)] for r in rows], "capacity-table")
        result["svg"] = cap.density_chart_svg(rows)
        return result

    @app.get("/api/pins")
    def list_pins() -> list[dict[str, Any]]:
        return regression.pins(warehouse())

    @app.post("/api/pins", dependencies=auth.edit_access(airflow))
    def change_pin(request: PinRequest) -> list[dict[str, Any]]:
        """Pin a run as the regression baseline (of a suite, or of all), or remove that pin."""
        _check(request.run_id, _RUN_ID)
        suite = _check(request.suite)
        if request.remove:
            regression.unpin(warehouse(), suite=suite)
        else:
            try:
                regression.pin(warehouse(), request.run_id, suite=suite, note=(request.note or "")[:500] or None)
            except LookupError as exc:
                raise HTTPException(status_code=404, detail=str(exc)) from None
        return regression.pins(warehouse())

    @app.get("/runs/{run_id}/{name}")
    def report_file(run_id: str, name: str) -> Response:
        if not _RUN_ID.match(run_id) or not _FILE.match(name) or ".." in run_id:
            raise HTTPException(status_code=404, detail="no such report")
        store = storage.store()
        key = f"reports/{run_id}/{name}"
        local = store.local_path(key)
        if local is not None:
            if not local.is_file():
                raise HTTPException(status_code=404, detail="no such report")
            return FileResponse(local)
        try:
            data = store.read_bytes(key)
        except FileNotFoundError:
            raise HTTPException(status_code=404, detail="no such report") from None
        return Response(content=data, media_type=mimetypes.guess_type(name)[0] or "application/octet-stream")

    return app
