"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 13:01:34.742953
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

SAMPLE_FACTS = """
CREATE VIEW sample_facts AS
SELECT r.run_id, r.scheduled, r.started_at AS run_started_at, r.profile, r.provider,
       e.job_id, e.platform, e.repetition, e.status,
       b.suite, b.name AS benchmark, b.parameters_hash, b.parameters,
       env.hostname, env.cpu_model, env.gpu_model, env.gpu_count, env.in_container,
       s.metric, s.value, s.unit, s.labels
FROM samples s
JOIN executions e ON e.id = s.execution_id
JOIN runs r ON r.id = e.run_pk
JOIN benchmarks b ON b.id = e.benchmark_id
JOIN environments env ON env.id = e.environment_id
"""


def upgrade() -> None:
    op.create_table(
        "benchmarks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=60), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("parameters_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "parameters", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmarks")),
        sa.UniqueConstraint("suite", "name", "parameters_hash", name=op.f("uq_benchmarks_suite_name_parameters_hash")),
    )
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("platform", sa.String(length=40), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=True),
        sa.Column("cpu_model", sa.String(length=255), nullable=True),
        sa.Column("cpu_count", sa.Integer(), nullable=True),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_model", sa.String(length=255), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("gpu_driver", sa.String(length=64), nullable=True),
        sa.Column("tensorflow_version", sa.String(length=40), nullable=True),
        sa.Column("cuda_version", sa.String(length=40), nullable=True),
        sa.Column("in_container", sa.Boolean(), nullable=False),
        sa.Column("container_runtime", sa.String(length=40), nullable=True),
        sa.Column("cpu_limit_cores", sa.Float(), nullable=True),
        sa.Column("memory_limit_bytes", sa.BigInteger(), nullable=True),
        sa.Column(
            "details", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_environments_fingerprint")),
    )
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_environments_platform"), ["platform"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=120), nullable=False),
        sa.Column("dag_id", sa.String(length=250), nullable=True),
        sa.Column("profile", sa.String(length=40), nullable=True),
        sa.Column("provider", sa.String(length=40), nullable=True),
        sa.Column("scheduled", sa.Boolean(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "config", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("run_id", name=op.f("uq_runs_run_id")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_started_at"), ["started_at"], unique=False)

    op.create_table(
        "executions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=40), nullable=False),
        sa.Column("repetition", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("archive_path", sa.Text(), nullable=True),
        sa.Column(
            "labels", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_id"], ["benchmarks.id"], name=op.f("fk_executions_benchmark_id_benchmarks")
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environments.id"], name=op.f("fk_executions_environment_id_environments")
        ),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], name=op.f("fk_executions_run_pk_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_executions")),
        sa.UniqueConstraint("job_id", name=op.f("uq_executions_job_id")),
    )
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_executions_benchmark_id_platform"), ["benchmark_id", "platform"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_executions_run_pk"), ["run_pk"], unique=False)
        batch_op.create_index(batch_op.f("ix_executions_status"), ["status"], unique=False)

    op.create_table(
        "samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=120), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("unit", sa.String(length=40), nullable=False),
        sa.Column(
            "labels", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["execution_id"], ["executions.id"], name=op.f("fk_samples_execution_id_executions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint("execution_id", "ordinal", name=op.f("uq_samples_execution_id_ordinal")),
    )
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_samples_metric_execution_id"), ["metric", "execution_id"], unique=False)

    # One flat row per sample: what planners query and what BI tools connect to.
    op.execute(SAMPLE_FACTS)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS sample_facts")
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_samples_metric_execution_id"))

    op.drop_table("samples")
    with op.batch_alter_table("executions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_executions_status"))
        batch_op.drop_index(batch_op.f("ix_executions_run_pk"))
        batch_op.drop_index(batch_op.f("ix_executions_benchmark_id_platform"))

    op.drop_table("executions")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_started_at"))

    op.drop_table("runs")
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_environments_platform"))

    op.drop_table("environments")
    op.drop_table("benchmarks")
