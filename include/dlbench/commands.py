"""The registry of ``dlbench``'s subcommands, below the modules that define them: :mod:`dlbench.cli`
(the warehouse and reports) and :mod:`dlbench.planning_cli` (the planners') both register here, and
``cli`` imports ``planning_cli``, so every arrow points down (before, ``cli`` loaded
``planning_cli`` by name and ``planning_cli`` imported ``cli`` back: a circle the import graph
did not show)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

Handler = Callable[[argparse.Namespace], int]
Registrar = Callable[[Any], None]  # receives argparse's subparsers object

REGISTRARS: list[Registrar] = []


def subcommand(register: Registrar) -> Registrar:
    REGISTRARS.append(register)
    return register


def warehouse_engine(args: argparse.Namespace) -> Engine:
    """The migrated warehouse named by ``--url`` (default: $DLBENCH_WAREHOUSE_URL, else SQLite)."""
    from dlbench.warehouse import db  # heavy: SQLAlchemy and Alembic, for the commands that use the warehouse

    return db.upgrade(db.engine_for(args.url))
