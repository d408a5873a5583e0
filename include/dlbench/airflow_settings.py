"""Load ``airflow_settings.yaml`` (Astro CLI format) into a plain Airflow installation.

Only the Astro CLI reads that file natively; this writes its pools, Variables and connections into
Airflow's metadata database (:func:`apply`), so the same file serves Astro users and plain-Airflow
users (``dlbench airflow-settings``; ``make airflow-settings``
in this checkout). The file is the package's (``dlbench/airflow_settings.yaml``; the checkout's root
``airflow_settings.yaml``, where Astro looks, links to it), so an Airflow that installed dlbench
has it.

Idempotent either way. By default what Airflow already has is **kept**: an operator who raised the
job pool to 8 slots or pointed ``dlbench_warehouse`` at PostgreSQL keeps that through every upgrade,
and the command names what it kept. ``--overwrite`` makes the file the truth (the checkout's make
targets use it: there the file is the deployment).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

PACKAGED = Path(__file__).with_name("airflow_settings.yaml")
"""The settings dlbench needs, shipped with the package."""
KINDS = ("pools", "variables", "connections")


def convert(settings: dict[str, Any]) -> dict[str, Any]:
    """Astro ``airflow:`` section -> per kind, name -> its fields (a Variable: its value)."""
    section = settings.get("airflow") or {}
    pools = {
        p["pool_name"]: {"slots": int(p["pool_slot"]), "description": p.get("pool_description") or ""}
        for p in section.get("pools") or []
    }
    variables = {v["variable_name"]: str(v["variable_value"]) for v in section.get("variables") or []}
    connections = {}
    for c in section.get("connections") or []:
        extra = c.get("conn_extra")
        connections[c["conn_id"]] = {
            "conn_type": c["conn_type"],
            **{k: c.get(f"conn_{k}") for k in ("host", "schema", "login", "password", "port") if c.get(f"conn_{k}")},
            **({"extra": json.dumps(extra) if isinstance(extra, dict) else extra} if extra else {}),
        }
    return {"pools": pools, "variables": variables, "connections": connections}


def apply(converted: dict[str, Any], overwrite: bool) -> dict[str, list[str]]:
    """Write ``converted`` into Airflow's metadata database (this process's Airflow configuration:
    ``AIRFLOW_HOME``, ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``), in one transaction; returns per kind
    what was written and what was kept (``kept <kind>``) because Airflow had it and ``overwrite``
    was off. In this process, not through ``airflow pools|variables|connections import``: the six
    CLI processes a keep-or-write needs took 50-100 s on a loaded 2-core machine."""
    # heavy: Airflow's ORM (seconds to import); only this command needs it, and the package's
    # other commands run where Airflow is not installed
    from airflow.models.connection import Connection

    # heavy: as above
    from airflow.models.pool import Pool

    # heavy: as above
    from airflow.models.variable import Variable

    # heavy: as above
    from airflow.utils.session import create_session

    # heavy: SQLAlchemy, Airflow's (as above)
    from sqlalchemy import select

    done: dict[str, list[str]] = {}
    with create_session() as session:
        keys = {"pools": Pool.pool, "variables": Variable.key, "connections": Connection.conn_id}
        models = {"pools": Pool, "variables": Variable, "connections": Connection}
        for kind in KINDS:
            wanted = converted[kind]
            existing: set[str] = {row for row in session.scalars(select(keys[kind]).where(keys[kind].in_(list(wanted))))
                                  if row is not None}
            kept = [] if overwrite else sorted(existing)
            written = sorted(set(wanted) - set(kept))
            done[kind], done[f"kept {kind}"] = written, kept
            for name in written:
                if name in existing:  # overwrite: the file's object replaces Airflow's
                    session.delete(session.scalars(select(models[kind]).where(keys[kind] == name)).one())
                    session.flush()
                fields = wanted[name]
                if kind == "pools":
                    session.add(Pool(pool=name, slots=fields["slots"], description=fields["description"],
                                     include_deferred=False))
                elif kind == "variables":
                    session.add(Variable(key=name, val=fields))
                else:
                    session.add(Connection(conn_id=name, **fields))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench airflow-settings", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("settings", type=Path, nargs="?", default=PACKAGED,
                        help="an airflow_settings.yaml (default: the one shipped with dlbench)")
    parser.add_argument("--overwrite", action="store_true",
                        help="write the file's values over what Airflow has (default: keep what it has)")


def run(args: argparse.Namespace) -> int:
    converted = convert(yaml.safe_load(args.settings.read_text()))
    done = apply(converted, args.overwrite)
    for kind in KINDS:
        if done[kind]:
            print(f"imported {len(done[kind])} {kind}: {', '.join(done[kind])}")
        if done[f"kept {kind}"]:
            print(f"kept {len(done[f'kept {kind}'])} {kind} Airflow already has (--overwrite replaces them): "
                  f"{', '.join(done[f'kept {kind}'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
