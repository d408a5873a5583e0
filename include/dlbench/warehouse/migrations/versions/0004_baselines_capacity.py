"""pinned regression baselines, the capacity view, the regression-history index

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 04:20:00

- ``baseline_pins``: a run named as the regression baseline, per suite or for all (``*``)
  (``dlbench baseline pin``, the explorer; docs/regressions.md).
- view ``capacity_facts``: the tf_cnn case samples with the facts capacity planning groups by
  (hardware type, model, data, batch, scenario, tenants per host), extracted from the JSON
  columns with each database's own JSON operators, so the documented planner SQL
  (docs/capacity.md) is the same text on SQLite and PostgreSQL.
- index ``executions(environment_id, benchmark_id)``: a case's history (same benchmark, same
  environment fingerprint), what regression detection and the explorer's trend read.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# {p}(column, key): the key's value as text; SQLite's json_extract and PostgreSQL's ->> (JSONB).
_CAPACITY_FACTS = """
CREATE VIEW capacity_facts AS
SELECT r.run_id, r.scheduled, r.started_at AS run_started_at,
       e.job_id, e.platform, e.repetition,
       COALESCE(env.gpu_model, env.cpu_model) AS hardware, env.gpu_count, env.fingerprint,
       b.suite, b.name AS benchmark, b.parameters_hash,
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


def _capacity_facts(dialect: str) -> str:
    if dialect == "postgresql":
        def p(column: str, key: str) -> str:
            return f"({column} ->> '{key}')"
    else:
        def p(column: str, key: str) -> str:
            return f"CAST(json_extract({column}, '$.{key}') AS TEXT)"
    return _CAPACITY_FACTS.format(
        data=p("b.parameters", "data"), batch=p("b.parameters", "batch_size"),
        batch_per_device=p("b.parameters", "batch_size_per_device"), scenario=p("b.parameters", "scenario"),
        interference=p("b.parameters", "interference"), tenants=p("b.parameters", "tenants"),
        role=p("e.labels", "role"))


def upgrade() -> None:
    op.create_table(
        "baseline_pins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=60), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name=op.f("fk_baseline_pins_run_pk_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_baseline_pins")),
        sa.UniqueConstraint("scope", name=op.f("uq_baseline_pins_scope")),
    )
    op.create_index(op.f("ix_baseline_pins_run_pk"), "baseline_pins", ["run_pk"], unique=False)
    # Plain CREATE INDEX (no batch copy): a batch migration would break the views on SQLite.
    op.create_index(op.f("ix_executions_environment_id_benchmark_id"), "executions",
                    ["environment_id", "benchmark_id"], unique=False)
    op.execute(_capacity_facts(op.get_bind().dialect.name))


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS capacity_facts")
    op.drop_index(op.f("ix_executions_environment_id_benchmark_id"), table_name="executions")
    op.drop_index(op.f("ix_baseline_pins_run_pk"), table_name="baseline_pins")
    op.drop_table("baseline_pins")
