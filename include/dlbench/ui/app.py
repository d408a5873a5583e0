"""A small FastAPI app that lists benchmark reports and serves them inside the Airflow UI.

Reports are files written by the DAG's report task (``reports/<run_id>/``); this app only
serves what exists, so it needs no database session and cannot change anything.
Links are relative, so the app works under any prefix (Airflow mounts it at ``/dlbench``).
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from dlbench import paths

_RUN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")
_FILE = re.compile(r"^[A-Za-z0-9_.-]{1,120}\.(html|png|csv|json|txt)$")


def _reports() -> list[tuple[str, datetime, Path]]:
    root = paths.reports_dir()
    found = []
    for directory in root.iterdir() if root.exists() else []:
        page = directory / "report.html"
        if directory.is_dir() and page.exists() and _RUN_ID.match(directory.name):
            found.append((directory.name, datetime.fromtimestamp(page.stat().st_mtime, UTC), page))
    return sorted(found, key=lambda item: item[1], reverse=True)


def create_app() -> FastAPI:
    app = FastAPI(title="dlbench reports", description="Benchmark comparison reports")

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        rows = "".join(
            f'<tr><td><a href="runs/{html.escape(run)}/report.html">{html.escape(run)}</a></td>'
            f"<td>{when:%Y-%m-%d %H:%M} UTC</td></tr>"
            for run, when, _ in _reports()
        ) or '<tr><td colspan="2">No report yet: trigger the dlbench_benchmark DAG.</td></tr>'
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>dlbench reports</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{padding:.3em 1em;text-align:left}</style>"
            "</head><body><h1>Benchmark reports</h1><p>Newest first. Each report compares platforms "
            "normalized to bare metal, with mean, std and Diff% over repetitions.</p>"
            f"<table><tr><th>Run</th><th>Written</th></tr>{rows}</table></body></html>"
        )

    @app.get("/api/reports")
    def list_reports() -> list[dict[str, str]]:
        return [{"run_id": run, "written_at": when.isoformat(), "url": f"runs/{run}/report.html"}
                for run, when, _ in _reports()]

    @app.get("/runs/{run_id}/{name}")
    def report_file(run_id: str, name: str) -> FileResponse:
        if not _RUN_ID.match(run_id) or not _FILE.match(name):
            raise HTTPException(status_code=404, detail="no such report")
        path = paths.reports_dir() / run_id / name
        if not path.is_file():
            raise HTTPException(status_code=404, detail="no such report")
        return FileResponse(path)

    return app
