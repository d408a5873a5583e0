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
``$DLBENCH_HOME`` (the DAG's precedence: :func:`dlbench.hooks.warehouse.warehouse_location`). docs/explorer.md.
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

from dlbench import storage
from dlbench.hooks import warehouse as warehouse_hook
from dlbench.reports.analysis import capacity as cap
from dlbench.reports.analysis import regression
from dlbench.reports.analysis import stats as st
from dlbench.reports.analysis.metrics import Direction
from dlbench.reports.analysis.serving import FLEET_RATE
from dlbench.reports.rendering.charts import DIRECTION_TEXT, FLAG_MARK, Bar, bar_chart, density_chart_svg, line_chart
from dlbench.suites import Suite
from dlbench.ui import auth, explorer
from dlbench.ui.page import PAGE

_RUN_ID = re.compile(r"^[A-Za-z0-9_.:+-]{1,120}$")
_FILE = re.compile(r"^[A-Za-z0-9_.-]{1,120}\.(html|png|csv|json|txt|svg)$")
_NAME = re.compile(r"^[A-Za-z0-9_. +#=/%()-]{1,200}$")
_FRAMEWORK = re.compile(r"^[a-z0-9_]{1,40}$")
"""A ``benchmarks.framework`` value (``tensorflow``, ``pytorch``, ``jax``: lower case, one word)."""


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
        url, _ = warehouse_hook.warehouse_location()
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


def _table(headers: list[str], rows: list[list[str]], table_id: str, empty: str = "no data for this selection") -> str:
    """An HTML table in a box that scrolls on its own: a wide table never widens the page."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (f'<div class="scroll"><table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>'
            f'{body or f"<tr><td colspan=99>{html.escape(empty)}</td></tr>"}</tbody></table></div>')


def _dag_run_links(runs: list[dict[str, Any]]) -> str:
    """Links to the Airflow UI's DAG run pages by Airflow's own run id (:func:`explorer.dag_runs`),
    relative to the plugin's mount (``/dlbench/``), opened in the top window: inside Airflow the
    explorer is a frame, and a link opened in it would nest a second Airflow UI."""
    return ", ".join(f'<a class="dagrun" target="_top" href="../dags/{quote(r["dag_id"], safe="")}/runs/'
                     f'{quote(r["dag_run_id"], safe="")}">{html.escape(r["run_id"])}</a>' for r in runs)


def _interval(low: float | None, high: float | None, digits: int = 3) -> str:
    return "-" if low is None or high is None else f"[{low:.{digits}g}, {high:.{digits}g}]"


def _flag_text(row: dict[str, Any]) -> str:
    """Why not to trust a comparison row yet: the report's flags (noise, outliers, a loaded
    machine) and too few repetitions (then no interval is stated)."""
    parts = [row.get("flags") or ""]
    if row.get("verdict") == st.Verdict.TOO_FEW_REPETITIONS.value:
        parts.append(f"too few repetitions (n={row.get('n')}): no interval")
    return "; ".join(p for p in parts if p)


def _flag_cell(text: str) -> str:
    return f'<span class="flag" title="{html.escape(text)}">{FLAG_MARK} {html.escape(text)}</span>' if text else ""


def _group(row: dict[str, Any], several_frameworks: bool) -> str:
    """A comparison chart's group label: the case and metric, and the framework's name when the
    chart shows several (a TensorFlow case's name has no framework word of its own)."""
    label = f'{row["case"]} · {row["metric"]}'
    return f'{row["framework"]} · {label}' if several_frameworks else label


def _comparison_charts(rows: list[dict[str, Any]]) -> str:
    """One bar chart per direction (higher-is-better metrics, then lower-is-better): ×BM with its
    interval and ⚠ on flagged bars. A ×BM of 1.2 is good for throughput and bad for elapsed time,
    so the two are never drawn on one axis. The series stay the platforms (one colour each,
    everywhere); with several frameworks each group names its framework."""
    charts = []
    several = len({r["framework"] for r in rows}) > 1
    for direction in Direction:
        mine = [r for r in rows if r["direction"] == direction.value and r["normalized"] is not None]
        if not mine:
            continue
        groups = list(dict.fromkeys(_group(r, several) for r in mine))
        platforms = list(dict.fromkeys(r["platform"] for r in mine))
        bars = {(_group(r, several), r["platform"]): Bar(
            r["normalized"], r["normalized_ci_low"], r["normalized_ci_high"], _flag_text(r)) for r in mine}
        charts.append(bar_chart(
            groups, {p: [bars.get((g, p)) for g in groups] for p in platforms}, reference=1.0, direction=direction,
            y_label="×BM (bare metal = 1.0)", title=f"{DIRECTION_TEXT[direction].split(' ', 1)[1]}: normalized "
            "to bare metal, 95 % interval", chart_id=f"comparison-chart-{direction.value}"))
    return "".join(charts) or bar_chart([], {}, chart_id="comparison-chart-empty")


class PinRequest(BaseModel):
    run_id: str
    suite: str | None = None
    note: str | None = None
    remove: bool = False


def _filters(runs: list[str], since: str | None, until: str | None, suite: str | None, model: str | None,
             data: str | None, scenario: str | None, platforms: list[str], metric: str | None,
             scheduled_only: bool = False, framework: str | None = None) -> explorer.Filters:
    """The views' selection from a request's query parameters, each checked (a bad value is dropped)."""
    return explorer.Filters(
        runs=[r for r in (_check(r, _RUN_ID) for r in runs) if r], since=_date(since), until=_date(until),
        scheduled_only=scheduled_only, suite=_check(suite) or explorer.Filters.suite, model=_check(model),
        data=_check(data),
        framework=_check(framework, _FRAMEWORK), scenario=_check(scenario),
        platforms=[p for p in (_check(p) for p in platforms) if p], metric=_check(metric))


def index_page() -> str:
    """The explorer's page, with the list of reports written so far."""
    rows = "".join(
        f'<tr><td><a href="runs/{html.escape(run)}/report.html">{html.escape(run)}</a></td>'
        f"<td>{when:%Y-%m-%d %H:%M} UTC</td></tr>"
        for run, when, _ in _reports()
    ) or '<tr><td colspan="2">No report yet: trigger the dlbench_benchmark DAG.</td></tr>'
    # the serving view's default demand is the report's (the page and the API start from it)
    return PAGE.replace("{{REPORT_ROWS}}", rows).replace("{{FLEET_RATE}}", f"{FLEET_RATE:g}")


def comparison_view(engine: Engine, f: explorer.Filters) -> dict[str, Any]:
    """The comparison view: rows, their table and charts, links to the DAG runs."""
    rows = explorer.comparison(engine, f)
    for r in rows:
        r["flag_text"] = _flag_text(r)
    table = _table(["Case", "Data", "Framework", "Metric", "Platform", "n", "Mean", "×BM", "95 % interval",
                    "Diff %", "95 % interval", "Verdict", "Flags"], [
        [html.escape(r["case"]), html.escape(r["data"] or "-"), html.escape(r["framework"]),
         f'{html.escape(r["metric"])} <span class="direction" title="{DIRECTION_TEXT[Direction(r["direction"])]}">'
         f'{DIRECTION_TEXT[Direction(r["direction"])][0]}</span>', html.escape(r["platform"]),
         f'{r["n"]} runs' if r["n_of"] == "runs" else str(r["n"]),
         f'{_fmt(r["mean"])} {html.escape(r["unit"])}', _fmt(r["normalized"], 3),
         _interval(r["normalized_ci_low"], r["normalized_ci_high"]), _fmt(r["diff_pct"], 3),
         _interval(r["diff_pct_ci_low"], r["diff_pct_ci_high"]),
         f'<span class="verdict {html.escape(r["verdict"])}" title="margin ±{_fmt((r["margin"] or 0) * 100)}%">'
         f'{html.escape(st.VERDICT_TEXT.get(st.Verdict(r["verdict"]), r["verdict"]))}</span>',
         _flag_cell(r["flag_text"])]
        for r in rows], "comparison-table")
    return {"runs": f.runs, "rows": rows, "table": table, "svg": _comparison_charts(rows),
            "links": _dag_run_links(explorer.dag_runs(engine, f.runs))}


def trend_view(engine: Engine, f: explorer.Filters, case: str | None) -> dict[str, Any]:
    """The trend view: one case's series per platform, its change points, the chart and links."""
    result = explorer.trend(engine, f, case)
    # Several frameworks among the cases: the title names the chosen case's (its name may not).
    named = f' ({result["framework"]})' if len(set(result["case_frameworks"].values())) > 1 else ""
    names = [r["started_at"][:10] or r["run_id"] for r in result["runs"]]
    result["svg"] = line_chart(result["series"], marks=result["change_points"], x_names=names,
                               y_label=f'{result["metric"]} ({result["unit"]})', x_label="run",
                               direction=Direction(result["direction"]),
                               title=f'trend: {result["case"] or "-"}{named}', chart_id="trend-chart",
                               width=860)
    result["links"] = _dag_run_links(explorer.dag_runs(engine, [r["run_id"] for r in result["runs"]]))
    return result


def capacity_view(engine: Engine, hardware: str | None, f: explorer.Filters, *, airflow: bool) -> dict[str, Any]:
    """Per model, data kind, framework, platform and density, over the views' selection of runs."""
    result = explorer.capacity(engine, hardware, f, prices=cap.load_prices(airflow=airflow))
    rows = [cap.CapacityRow(**r) for r in result["rows"]]
    # The best per configuration is a set: every row not shown to give less per host than the top one.
    best = {id(r) for group in cap.configurations(rows).values() for r in cap.best_set(group)}
    result["best"] = [i for i, r in enumerate(rows) if id(r) in best]
    result["table"] = _table(
        ["Model", "Data", "Framework", "Batch", "Machine", "Platform", "Instances per host", "n",
         "Per instance (images/s)", "95 % interval", "Degradation %", "95 % interval", "Per host (images/s)",
         "95 % interval", "Cost per 1000 images", "Flags"],
        [[html.escape(r.model), html.escape(r.data or "-"), html.escape(r.framework), html.escape(r.batch or "-"),
          html.escape(r.machine or "-"), html.escape(r.platform) + (" ★" if id(r) in best else ""),
          str(r.instances_per_host),
          (f"{r.n} runs" if r.n_of == "runs" else str(r.n)) + (f" / {r.degradation_n}" if r.degradation_n else ""),
          _fmt(r.per_instance),
          _interval(r.per_instance_ci_low, r.per_instance_ci_high, 4), _fmt(r.degradation_pct, 3),
          _interval(r.degradation_ci_low, r.degradation_ci_high), _fmt(r.per_host),
          _interval(r.per_host_ci_low, r.per_host_ci_high, 4),
          "-" if r.cost_per_1000 is None else f"{r.cost_per_1000:.4g} {html.escape(r.currency or '')} "
          f"{_interval(r.cost_ci_low, r.cost_ci_high)}", _flag_cell(r.flags)] for r in rows],
        "capacity-table", empty=result["note"] or "no data for this selection")
    result["svg"] = "".join(
        density_chart_svg(mine, title=f"density vs degradation: {config}", chart_id=f"capacity-chart-{i}")
        for i, (config, mine) in enumerate(cap.configurations(rows).items())) or density_chart_svg(
        [], chart_id="capacity-chart-empty")
    return result


def serving_view(engine: Engine, f: explorer.Filters, demand: float = FLEET_RATE) -> dict[str, Any]:
    """The serving view: the capacity at the latency target per platform with the instances that
    serve ``demand`` requests/s (the report's answer, over the selected runs); TTFT and TPOT p99
    against the offered load, one line per platform and the target's flat line (the report's
    charts), and the points as a table."""
    result = explorer.serving(engine, f, demand)
    lines = result["capacity"]
    result["capacity_table"] = (
        (f"<p class='note'>Requests per second one instance sustains with {html.escape(lines[0]['target'])}, the "
         f"mean over n repetitions of the selected runs with its ×BM and 95 % interval, and the instances that "
         f"serve {demand:g} requests/s (⌈{demand:g} / capacity⌉).</p>" if lines else "")
        + _table(["Case", "Platform", "Capacity (requests/s)", "×BM [95 % interval]", "Verdict", "Answer",
                  "Tokens/s at capacity", f"Instances for {demand:g} requests/s", "n"],
                 [[html.escape(line["case"]), html.escape(line["platform"]), _fmt(line["capacity"]),
                   html.escape(line["ratio"]), html.escape(line["verdict"] if line["ratio"] != "baseline" else ""),
                   html.escape(line["answer"]), _fmt(line["tokens"]),
                   "–" if line["instances"] is None else str(line["instances"]), str(line["n"])] for line in lines],
                 "serving-capacity-table",
                 empty="no serving capacity in this selection (suite serving: docs/serving.md)"))
    rows = [[html.escape(curve["title"]), html.escape(platform), _fmt(point["rate"]), _fmt(point["ms"]),
             "-" if curve["target_ms"] is None else ("met" if point["ms"] <= curve["target_ms"] else "missed"),
             str(point["n"])]
            for curve in result["curves"] for platform, points in curve["points"].items() for point in points]
    result["table"] = _table(["Latency", "Platform", "Offered load (requests/s)", "Mean (ms)", "Target", "n"], rows,
                             "serving-table", empty="no serving run in this selection (suite serving: docs/serving.md)")
    result["svg"] = "".join(
        line_chart(curve["series"], x_label="offered load (requests/s, Poisson)", y_label="ms",
                   title=f"{curve['title']} against the load", chart_id=f"serving-chart-{curve['metric']}")
        for curve in result["curves"])
    return result


def change_pin(engine: Engine, request: PinRequest) -> list[dict[str, Any]]:
    """Pin a run as the regression baseline (of a suite, or of all), or remove that pin."""
    _check(request.run_id, _RUN_ID)
    suite = _check(request.suite)
    if request.remove:
        regression.unpin(engine, suite=suite)
    else:
        try:
            regression.pin(engine, request.run_id, suite=suite, note=(request.note or "")[:500] or None)
        except LookupError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None
    return regression.pins(engine)


def report_file(run_id: str, name: str) -> Response:
    """A file of a run's report, from the shared store (404 for anything that is not one)."""
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



def create_app(engine: Engine | Callable[[], Engine] | None = None, *, airflow: bool = False) -> FastAPI:
    """The app; ``engine`` (or a factory) defaults to :func:`default_engine`, opened on first use.
    ``airflow``: running inside Airflow (the plugin), so Airflow Variables can be read. Each route
    is one call of the view function above that does its work."""
    app = FastAPI(title="dlbench explorer", description="Benchmark results explorer and reports",
                  # Inside Airflow: every route needs an Airflow user who may read the DAG (auth.py), and
                  # no schema or docs page answers without one.
                  dependencies=auth.read_access(airflow), openapi_url=None if airflow else "/openapi.json")
    holder: dict[str, Engine] = {}

    def warehouse() -> Engine:
        if "engine" not in holder:
            holder["engine"] = engine if isinstance(engine, Engine) else (engine or default_engine)()
        return holder["engine"]

    app.get("/", response_class=HTMLResponse)(index_page)

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
                   metric: str | None = None, framework: str | None = None) -> dict[str, Any]:
        f = _filters(runs, since, until, suite, model, data, scenario, platforms, metric,
                     scheduled_only=bool(since or until) and not runs, framework=framework)
        return comparison_view(warehouse(), f)

    @app.get("/api/trend")
    def trend(runs: list[str] = Query(default=[]), since: str | None = None, until: str | None = None,
              suite: str | None = None, model: str | None = None, data: str | None = None,
              scenario: str | None = None, platforms: list[str] = Query(default=[]), metric: str | None = None,
              case: str | None = None, framework: str | None = None) -> dict[str, Any]:
        return trend_view(warehouse(), _filters(runs, since, until, suite, model, data, scenario, platforms, metric,
                                                framework=framework), _check(case))

    @app.get("/api/capacity")
    def capacity(hardware: str | None = None, runs: list[str] = Query(default=[]), since: str | None = None,
                 until: str | None = None, suite: str | None = None, model: str | None = None, data: str | None = None,
                 platforms: list[str] = Query(default=[]), framework: str | None = None) -> dict[str, Any]:
        return capacity_view(warehouse(), _check(hardware), _filters(runs, since, until, suite, model, data, None,
                                                                     platforms, None, framework=framework),
                             airflow=airflow)

    @app.get("/api/serving")
    def serving(runs: list[str] = Query(default=[]), since: str | None = None, until: str | None = None,
                suite: str | None = None, model: str | None = None,
                platforms: list[str] = Query(default=[]),
                demand: float = Query(default=FLEET_RATE, gt=0, le=1e9,
                                      description="requests/s the fleet must serve at the latency target")
                ) -> dict[str, Any]:
        # The page's model filter names a model of its chosen suite: a serving model only then.
        model = model if suite == Suite.SERVING.value else None
        return serving_view(warehouse(), _filters(runs, since, until, None, model, None, None, platforms, None,
                                                  scheduled_only=bool(since or until) and not runs), demand)

    @app.get("/api/pins")
    def list_pins() -> list[dict[str, Any]]:
        return regression.pins(warehouse())

    @app.post("/api/pins", dependencies=auth.edit_access(airflow))
    def pin(request: PinRequest) -> list[dict[str, Any]]:
        return change_pin(warehouse(), request)

    app.get("/runs/{run_id}/{name}")(report_file)
    return app
