"""Load ``airflow_settings.yaml`` (Astro CLI format) into a plain Airflow installation.

Only the Astro CLI reads that file natively; this converts it to the JSON that
``airflow pools|variables|connections import`` accept and runs those three commands, so the
same file serves Astro users and plain-Airflow users. Re-running it is safe (imports overwrite).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml


def convert(settings: dict[str, Any]) -> dict[str, Any]:
    """Astro ``airflow:`` section -> the import formats of the airflow CLI."""
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("settings", type=Path, nargs="?", default=Path("airflow_settings.yaml"))
    parser.add_argument("--airflow", default=str(Path(sys.executable).with_name("airflow")))
    args = parser.parse_args(argv)
    converted = convert(yaml.safe_load(args.settings.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("pools", "variables", "connections"):
            if not converted[kind]:
                continue
            path = Path(tmp) / f"{kind}.json"
            path.write_text(json.dumps(converted[kind]))
            extra = ["--overwrite"] if kind == "connections" else []
            # `connections import` fails on existing ids without --overwrite (Airflow >= 2.9).
            subprocess.run([args.airflow, kind, "import", *extra, str(path)], check=True)
            print(f"imported {len(converted[kind])} {kind}: {', '.join(converted[kind])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
