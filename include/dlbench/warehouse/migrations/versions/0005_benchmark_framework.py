"""the framework a training case ran with, on benchmarks and in both views

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 09:00:00

Platforms are compared per framework (issue 23: TensorFlow, PyTorch, JAX). The framework is a
requested parameter of a tf_cnn case, but only for the new frameworks: a TensorFlow document has
no ``framework`` parameter, old or new (its case keeps the identity it had before frameworks
existed). A planner should not have to know that, nor each database's JSON operators, to ask for
one framework: ``benchmarks.framework`` states it (``tensorflow`` | ``pytorch`` | ``jax``; NULL
for suites with no selectable framework), and the views ``sample_facts`` and ``capacity_facts``
carry it, so ``WHERE framework = 'pytorch'`` is the same SQL on SQLite and PostgreSQL.

Existing rows are backfilled with the loader's rule (``dlbench.warehouse.load.benchmark_framework``,
written here in SQL as it stands at this revision): the ``framework`` parameter of a tf_cnn case,
else ``tensorflow``. A warehouse rebuilt from the archive gets the same values from the loader.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SAMPLE_FACTS = """
CREATE VIEW sample_facts AS
SELECT r.run_id, r.scheduled, r.started_at AS run_started_at, r.profile, r.provider,
       e.job_id, e.platform, e.repetition, e.status,
       b.suite, b.name AS benchmark, b.framework, b.parameters_hash, b.parameters,
       env.hostname, env.cpu_model, env.gpu_model, env.gpu_count, env.in_container,
       s.metric, s.value, s.unit, s.labels
FROM samples s
JOIN executions e ON e.id = s.execution_id
JOIN runs r ON r.id = e.run_pk
JOIN benchmarks b ON b.id = e.benchmark_id
JOIN environments env ON env.id = e.environment_id
"""

# {p}(column, key): the key's value as text; SQLite's json_extract and PostgreSQL's ->> (JSONB).
_CAPACITY_FACTS = """
CREATE VIEW capacity_facts AS
SELECT r.run_id, r.scheduled, r.started_at AS run_started_at,
       e.job_id, e.platform, e.repetition,
       COALESCE(env.gpu_model, env.cpu_model) AS hardware, env.gpu_count, env.fingerprint,
       b.suite, b.name AS benchmark, b.framework, b.parameters_hash,
       {data} AS data,
       COALESCE({batch}, {batch_per_device}) AS batch,
       COALESCE({scenario}, 'single') AS scenario,
       {interference} AS interference,
       CASE WHEN {interference} = 'tenants' THEN CAST({tenants} AS INTEGER) ELSE 1 END AS tenants,
       s.metric, s.value, s.unit
FROM samples s
JOIN executions e ON e.id = s.execution_id
JOIN runs r ON r.id = e.run_pk
JOIN benchmarks b ON b.id = e.benchmark_id
JOIN environments env ON env.id = e.environment_id
WHERE e.status = 'ok' AND b.suite = 'tf_cnn'
  AND ({role} IS NULL OR {role} = 'aggregate')
"""

_BACKFILL = """
UPDATE benchmarks SET framework = LOWER(COALESCE(NULLIF({framework}, ''), 'tensorflow'))
WHERE suite = 'tf_cnn'
"""


def _json_text(dialect: str) -> Callable[[str, str], str]:
    """(column, key) -> the key's value as text, in the dialect's JSON operators (as in 0004)."""
    if dialect == "postgresql":
        return lambda column, key: f"({column} ->> '{key}')"
    return lambda column, key: f"CAST(json_extract({column}, '$.{key}') AS TEXT)"


def _capacity_facts(dialect: str) -> str:
    p = _json_text(dialect)
    return _CAPACITY_FACTS.format(
        data=p("b.parameters", "data"), batch=p("b.parameters", "batch_size"),
        batch_per_device=p("b.parameters", "batch_size_per_device"), scenario=p("b.parameters", "scenario"),
        interference=p("b.parameters", "interference"), tenants=p("b.parameters", "tenants"),
        role=p("e.labels", "role"))


def _revision(filename: str) -> ModuleType:
    """An earlier revision's module, for the view definitions it created (what a downgrade
    restores), so each definition is written once, in the revision that made it."""
    spec = importlib.util.spec_from_file_location(f"_dlbench_migration_{Path(filename).stem}",
                                                  Path(__file__).with_name(filename))
    assert spec is not None and spec.loader is not None, filename
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _drop_views() -> None:
    op.execute("DROP VIEW IF EXISTS capacity_facts")
    op.execute("DROP VIEW IF EXISTS sample_facts")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    # Views are rebuilt around a plain ADD COLUMN (as in 0003): a batch (copy-and-rename)
    # migration would break them on SQLite, and a view's column list is fixed when it is created.
    _drop_views()
    op.add_column("benchmarks", sa.Column("framework", sa.String(length=40), nullable=True))
    op.execute(_BACKFILL.format(framework=_json_text(dialect)("parameters", "framework")))
    op.execute(SAMPLE_FACTS)
    op.execute(_capacity_facts(dialect))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    _drop_views()
    op.execute("ALTER TABLE benchmarks DROP COLUMN framework")  # SQLite >= 3.35 and PostgreSQL
    op.execute(_revision("0001_initial.py").SAMPLE_FACTS)
    op.execute(_revision("0004_baselines_capacity.py")._capacity_facts(dialect))
