"""``dlbench``: the controller's command line (warehouse and reports).

    dlbench db upgrade [--url URL]             migrate the warehouse to the latest schema
    dlbench load FILE...                       load result documents (idempotent)
    dlbench reload-archive [DIR]               reload the raw archive (default: the shared store's)
    dlbench report [--run-id ID] [--out DIR]   regenerate a report from the warehouse
    dlbench dags install DIR                   write the DAG files (one line each) into a DAG folder
    dlbench airflow-settings [FILE]            create the pools, Variables and connections dlbench needs

A thin layer over the Python functions (dlbench.warehouse, dlbench.reports). Adding a
subcommand: write a function that takes the subparsers object, adds its parser and sets
``handler`` (a function ``Namespace -> exit status``), decorate it with
:func:`dlbench.commands.subcommand`, and define it here or in a module this one imports (the
planners' commands are in :mod:`dlbench.planning_cli`).
Imports of heavy libraries belong inside handlers so ``dlbench --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dlbench import airflow_settings, dags, paths, planning_cli  # noqa: F401 - planning_cli: registers its subcommands
from dlbench.commands import REGISTRARS, Handler, subcommand, warehouse_engine


@subcommand
def _db(sub: Any) -> None:
    parser = sub.add_parser("db", help="warehouse schema")
    parser.add_argument("action", choices=["upgrade"], help="upgrade: migrate to the latest revision")

    def run(args: argparse.Namespace) -> int:
        from dlbench.warehouse import db  # heavy: SQLAlchemy and Alembic; `dlbench --help` stays instant

        engine = warehouse_engine(args)
        print(f"warehouse {engine.url.render_as_string(hide_password=True)} at revision "
              f"{db.current_revision(engine)}")
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _load(sub: Any) -> None:
    parser = sub.add_parser("load", help="load result documents (idempotent: upsert by job_id)")
    parser.add_argument("files", nargs="+", type=Path)

    def run(args: argparse.Namespace) -> int:
        from dlbench.warehouse.load import load_documents  # heavy: SQLAlchemy; `dlbench --help` stays instant

        missing = [str(f) for f in args.files if not f.is_file()]
        if missing:
            print(f"dlbench load: no such file: {', '.join(missing)}", file=sys.stderr)
            return 2
        print(load_documents(warehouse_engine(args), args.files))
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _reload_archive(sub: Any) -> None:
    parser = sub.add_parser("reload-archive", help="reload the raw result archive (idempotent)")
    parser.add_argument("dir", nargs="?", type=Path,
                        help="a local copy of archived documents (a file, a run's directory or a tree); default: "
                             "the whole archive in the shared store (DLBENCH_STORAGE_URL, else $DLBENCH_HOME)")

    def run(args: argparse.Namespace) -> int:
        from dlbench.warehouse.load import reload_archive  # heavy: SQLAlchemy; `dlbench --help` stays instant

        try:
            print(reload_archive(warehouse_engine(args), args.dir))
        except FileNotFoundError as exc:
            print(f"dlbench reload-archive: {exc}", file=sys.stderr)
            return 2
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _report(sub: Any) -> None:
    parser = sub.add_parser("report", help="regenerate a report from the warehouse")
    parser.add_argument("--run-id", default=None, help="default: the latest run")
    parser.add_argument("--out", type=Path, default=None, help="default: $DLBENCH_HOME/reports/<run_id>")

    def run(args: argparse.Namespace) -> int:
        from dlbench.reports.analysis.compare import latest_run_id  # heavy: pandas, SQLAlchemy; --help stays instant
        from dlbench.reports.html import build_report  # heavy: pandas, matplotlib, SQLAlchemy
        from dlbench.reports.text import text_table  # heavy: pandas, SQLAlchemy

        engine = warehouse_engine(args)
        run_id = args.run_id or latest_run_id(engine)
        if run_id is None:
            print("the warehouse holds no run yet: run `make run` or trigger dlbench_benchmark", file=sys.stderr)
            return 1
        try:
            page = build_report(engine, run_id, args.out or paths.reports_dir() / run_id)
        except LookupError as exc:
            print(f"dlbench report: {exc}", file=sys.stderr)
            return 1
        print(text_table(engine, run_id, page.parent))
        print(f"\nreport: {page}")
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _dags(sub: Any) -> None:
    parser = sub.add_parser("dags", help="the DAG files of an Airflow that installed dlbench")
    parser.add_argument("action", choices=["install"],
                        help="install: write each DAG's one-line file into DIR (an unchanged one is left as it is)")
    parser.add_argument("folder", type=Path, metavar="DIR", help="the DAG folder ([core] dags_folder)")

    def run(args: argparse.Namespace) -> int:
        args.folder.mkdir(parents=True, exist_ok=True)
        for name in dags.DAG_FILES:
            path, text = args.folder / name, dags.dag_file(name)
            state = ("unchanged" if path.exists() and path.read_text() == text
                     else "replaced" if path.exists() else "written")
            if state != "unchanged":
                path.write_text(text)
            print(f"{path}: {state}")
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _airflow_settings(sub: Any) -> None:
    parser = sub.add_parser("airflow-settings", help="create the pools, Variables and connections dlbench needs "
                                                     "(from airflow_settings.yaml; what Airflow has is kept)")
    airflow_settings.add_arguments(parser)
    parser.set_defaults(handler=airflow_settings.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlbench", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="warehouse SQLAlchemy URL (default: $DLBENCH_WAREHOUSE_URL "
                                                    "or the SQLite file in $DLBENCH_HOME)")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in REGISTRARS:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
