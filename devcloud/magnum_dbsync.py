"""``magnum-db-manage upgrade`` on PostgreSQL (run in .devcloud/magnum-venv by magnumcloud.py).

Magnum's migrations are written for MySQL: three data migrations copy columns between existing
rows with ``UPDATE a INNER JOIN b ... SET``, which PostgreSQL rejects. On the devcloud the
database is always created empty, so those statements have no rows to touch: they are replaced
by a no-op here (and only when their tables are empty); every schema change runs as Magnum wrote it.
"""

from __future__ import annotations

import sys

import sqlalchemy as sa
from sqlalchemy import event


@event.listens_for(sa.engine.Engine, "before_cursor_execute", retval=True)
def _mysql_join_update(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
    text = " ".join(statement.split())
    if text.upper().startswith("UPDATE ") and " INNER JOIN " in text.upper():
        table = text.split()[1]
        cursor.execute(f"SELECT count(*) FROM {table}")
        if cursor.fetchone()[0]:
            raise RuntimeError(f"magnum_dbsync: MySQL-only data migration on a non-empty table {table}")
        return "SELECT 1", ()
    return statement, parameters


if __name__ == "__main__":
    from magnum.cmd import db_manage

    sys.argv = ["magnum-db-manage", "--config-file", sys.argv[1], "upgrade"]
    sys.exit(db_manage.main())
