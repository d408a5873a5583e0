"""``dlbench`` subcommands for planners (registered with :func:`dlbench.commands.subcommand`;
``dlbench.cli`` imports this module):

    dlbench compare [--run-id ID] [--baseline RUN] [--window N] [--json]   regressions (exit 3 if any)
    dlbench baseline pin RUN_ID [--suite S] [--note TEXT]                  pin a regression baseline
    dlbench baseline ack RUN_ID [--note TEXT]                              accept a run's regressions as the new level
    dlbench baseline unpin [--suite S] | dlbench baseline list
    dlbench capacity --hardware H --model M [--data D] [--price P --currency C]
    dlbench explorer [--host H] [--port P] [--prefix /p]                   serve the explorer (uvicorn)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dlbench.commands import subcommand, warehouse_engine
from dlbench.suites import Suite


@subcommand
def _compare(sub: Any) -> None:
    parser = sub.add_parser("compare", help="regressions of a run against the history of its cases")
    parser.add_argument("--run-id", default=None, help="default: the latest run")
    parser.add_argument("--baseline", default=None, help="a run id to compare with (default: the pinned run, "
                                                         "else the last --window runs)")
    parser.add_argument("--window", type=int, default=None, help="baseline runs (default 8)")
    parser.add_argument("--json", action="store_true", help="print JSON")

    def run(args: argparse.Namespace) -> int:
        from dlbench.reports.analysis import regression  # heavy: pandas, SQLAlchemy; `dlbench --help` stays instant
        from dlbench.reports.analysis.compare import latest_run_id  # heavy: pandas, SQLAlchemy

        engine = warehouse_engine(args)
        run_id = args.run_id or latest_run_id(engine)
        if run_id is None:
            print("the warehouse holds no run yet", file=sys.stderr)
            return 1
        try:
            found = regression.detect(engine, run_id, baseline_run=args.baseline,
                                      **({"window": args.window} if args.window else {}))
        except LookupError as exc:
            print(f"dlbench compare: {exc}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps({"run_id": run_id, "regressions": [r.as_dict() for r in found]}, indent=2))
        else:
            print(f"run {run_id}: {len(found)} regression(s)")
            for r in found:
                print(f"  {r}")
        return 3 if found else 0

    parser.set_defaults(handler=run)


@subcommand
def _baseline(sub: Any) -> None:
    parser = sub.add_parser("baseline", help="pin, unpin or list regression baselines; ack a run's regressions")
    parser.add_argument("action", choices=["pin", "unpin", "list", "ack"])
    parser.add_argument("run_id", nargs="?", help="pin: the run to compare later runs with; ack: the run whose "
                        "regressions are accepted as their cases' new level")
    parser.add_argument("--suite", default=None, help="only for this suite (default: every suite)")
    parser.add_argument("--note", default=None)

    def run(args: argparse.Namespace) -> int:
        from dlbench.reports.analysis import regression  # heavy: pandas, SQLAlchemy; `dlbench --help` stays instant

        engine = warehouse_engine(args)
        if args.action == "pin":
            if not args.run_id:
                print("dlbench baseline pin: name the run id", file=sys.stderr)
                return 2
            try:
                regression.pin(engine, args.run_id, suite=args.suite, note=args.note)
            except LookupError as exc:
                print(f"dlbench baseline pin: {exc}", file=sys.stderr)
                return 1
            print(f"baseline of {args.suite or 'every suite'}: {args.run_id}")
        elif args.action == "ack":
            if not args.run_id:
                print("dlbench baseline ack: name the run id", file=sys.stderr)
                return 2
            try:
                accepted = regression.acknowledge(engine, args.run_id, note=args.note)
            except LookupError as exc:
                print(f"dlbench baseline ack: {exc}", file=sys.stderr)
                return 1
            print(f"run {args.run_id}: {len(accepted)} regression(s) accepted as the new level")
            for r in accepted:
                print(f"  {r}")
        elif args.action == "unpin":
            removed = regression.unpin(engine, suite=args.suite)
            print(f"{'removed' if removed else 'no'} pin for {args.suite or 'every suite'}")
        else:
            for item in regression.pins(engine):
                print(f"{item['suite']}\t{item['run_id']}\t{item['pinned_at']}\t{item['note'] or ''}")
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _capacity(sub: Any) -> None:
    parser = sub.add_parser("capacity", help="images/s per host and cost per 1000 images, per platform")
    parser.add_argument("--hardware", default=None, help="GPU (else CPU) model; default: the first one")
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", default=None)
    parser.add_argument("--batch", default=None)
    parser.add_argument("--price", type=float, default=None, help="per host-hour (default: the Variable "
                        "dlbench_host_prices or $DLBENCH_HOME/prices.yaml)")
    parser.add_argument("--currency", default=None)

    def run(args: argparse.Namespace) -> int:
        from dlbench.reports.analysis import capacity  # heavy: pandas, SQLAlchemy; `dlbench --help` stays instant

        engine = warehouse_engine(args)
        kinds = capacity.hardware_types(engine)
        hardware = args.hardware or (kinds[0] if kinds else None)
        if hardware is None:
            print(f"the warehouse holds no {Suite.TF_CNN.value} result yet", file=sys.stderr)
            return 1
        prices = (capacity.Prices({"*": args.price}, args.currency) if args.price is not None
                  else capacity.load_prices())
        rows = capacity.capacity(engine, hardware, args.model, data=args.data, batch=args.batch, prices=prices)
        print(f"{hardware}, {args.model}{' ' + args.data if args.data else ''}")
        print(f"{'platform':26} {'N':>3} {'per inst.':>10} {'degr. %':>8} {'per host':>10} {'per 1000 img':>13}")
        for i, r in enumerate(rows):
            if i == 0 or r.config != rows[i - 1].config:  # each configuration its own rows, never averaged
                print(f"-- {r.config} (n={r.n}){'  ' + r.flags if r.flags else ''}")
            cost = "-" if r.cost_per_1000 is None else f"{r.cost_per_1000:.4g} {r.currency or ''}"
            print(f"{r.platform:26} {r.instances_per_host:>3} {r.per_instance:>10.1f} {r.degradation_pct:>8.1f} "
                  f"{r.per_host:>10.1f} {cost:>13}")
        return 0

    parser.set_defaults(handler=run)


@subcommand
def _explorer(sub: Any) -> None:
    parser = sub.add_parser("explorer", help="serve the results explorer outside Airflow (uvicorn)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--prefix", default="", help="mount path, e.g. /plugins/dlbench")

    def run(args: argparse.Namespace) -> int:
        import uvicorn  # optional: the explorer's server, only for this command
        from fastapi import FastAPI  # heavy: FastAPI and Starlette, only for this command

        from dlbench.ui.app import create_app  # heavy: FastAPI, pandas, SQLAlchemy

        engine = warehouse_engine(args)
        app = create_app(engine)
        if args.prefix.strip("/"):
            root = FastAPI()
            root.mount("/" + args.prefix.strip("/"), app)
            app = root
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0

    parser.set_defaults(handler=run)
