"""``dlbench``: the controller's command line (warehouse and reports).

    dlbench db upgrade [--url URL]        migrate the warehouse to the latest schema
    dlbench load FILE...                  load result documents (idempotent)
    dlbench reload-archive [DIR]          reload the raw archive (default: $DLBENCH_HOME/results)
    dlbench report [--run-id ID] [--out DIR]   regenerate a report from the warehouse
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from dlbench import paths

Handler = Callable[[argparse.Namespace], int]


def _engine(args: argparse.Namespace):  # noqa: ANN202 - sqlalchemy Engine, imported lazily
    from dlbench.warehouse import db

    return db.upgrade(db.engine_for(args.url))


def _db(args: argparse.Namespace) -> int:
    from dlbench.warehouse import db

    engine = _engine(args)
    print(f"warehouse {engine.url.render_as_string(hide_password=True)} at revision {db.current_revision(engine)}")
    return 0


def _load(args: argparse.Namespace) -> int:
    from dlbench.warehouse.load import load_documents

    print(load_documents(_engine(args), args.files))
    return 0


def _reload(args: argparse.Namespace) -> int:
    from dlbench.warehouse.load import reload_archive

    print(reload_archive(_engine(args), args.dir or paths.results_dir()))
    return 0


def _report(args: argparse.Namespace) -> int:
    from dlbench.reports import build_report, text_table
    from dlbench.reports.compare import latest_run_id

    engine = _engine(args)
    run_id = args.run_id or latest_run_id(engine)
    if run_id is None:
        print("the warehouse holds no run yet: run `make run` or trigger dlbench_benchmark", file=sys.stderr)
        return 1
    page = build_report(engine, run_id, args.out or paths.reports_dir() / run_id)
    print(text_table(engine, run_id))
    print(f"\nreport: {page}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbench", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="warehouse SQLAlchemy URL (default: $DLBENCH_WAREHOUSE_URL "
                                                    "or the SQLite file in $DLBENCH_HOME)")
    sub = parser.add_subparsers(dest="command", required=True)
    db = sub.add_parser("db", help="warehouse schema")
    db.add_argument("action", choices=["upgrade"])
    db.set_defaults(handler=_db)
    load = sub.add_parser("load", help="load result documents")
    load.add_argument("files", nargs="+", type=Path)
    load.set_defaults(handler=_load)
    reload = sub.add_parser("reload-archive", help="reload the raw result archive")
    reload.add_argument("dir", nargs="?", type=Path)
    reload.set_defaults(handler=_reload)
    report = sub.add_parser("report", help="regenerate a report from the warehouse")
    report.add_argument("--run-id", default=None, help="default: the latest run")
    report.add_argument("--out", type=Path, default=None)
    report.set_defaults(handler=_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
