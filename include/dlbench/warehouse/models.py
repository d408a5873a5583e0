"""The warehouse schema (SQLAlchemy 2), shaped for the questions capacity planners ask.

- runs: one benchmark run (one DAG run); ``scheduled`` separates the weekly trend from ad-hoc runs.
- environments: where it ran (platform, hardware, versions), deduplicated by a fingerprint.
- benchmarks: what ran (suite, name, requested parameters), deduplicated by a parameters hash,
  so "the same model/batch/data on another platform" is an equality on ``benchmark_id``; its
  ``framework`` is the one fact of the parameters planners filter on most (migration 0005).
- executions: one result document (job): run x environment x benchmark x repetition.
- samples: its measured values (metric, typed value, unit, labels).

The Alembic migrations in ``migrations/`` create exactly this; a test checks they agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

JSONType = JSON().with_variant(JSONB(), "postgresql")

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSONType}


class Run(Base):
    __tablename__ = "runs"
    # The trend query: scheduled runs in time order (migration 0002).
    __table_args__ = (Index(None, "scheduled", "started_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(120), unique=True)
    dag_id: Mapped[str | None] = mapped_column(String(250))
    profile: Mapped[str | None] = mapped_column(String(40))
    provider: Mapped[str | None] = mapped_column(String(40))
    scheduled: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    loaded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    config: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    tags: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)

    executions: Mapped[list[Execution]] = relationship(back_populates="run")


class Environment(Base):
    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    platform: Mapped[str] = mapped_column(String(40), index=True)
    hostname: Mapped[str | None] = mapped_column(String(255))
    cpu_model: Mapped[str | None] = mapped_column(String(255))
    cpu_count: Mapped[int | None] = mapped_column(Integer)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_model: Mapped[str | None] = mapped_column(String(255))
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    gpu_driver: Mapped[str | None] = mapped_column(String(64))
    tensorflow_version: Mapped[str | None] = mapped_column(String(40))
    cuda_version: Mapped[str | None] = mapped_column(String(40))
    in_container: Mapped[bool] = mapped_column(Boolean, default=False)
    container_runtime: Mapped[str | None] = mapped_column(String(40))
    cpu_limit_cores: Mapped[float | None] = mapped_column(Float)
    memory_limit_bytes: Mapped[int | None] = mapped_column(BigInteger)
    details: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)


class Benchmark(Base):
    __tablename__ = "benchmarks"
    __table_args__ = (UniqueConstraint("suite", "name", "parameters_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(60))
    name: Mapped[str] = mapped_column(String(120))
    parameters_hash: Mapped[str] = mapped_column(String(64))
    parameters: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    # The framework a training case ran with (tensorflow | pytorch | jax), a function of the
    # parameters (dlbench.warehouse.load.benchmark_framework): a plain column so planners' SQL
    # filters ``WHERE framework = 'pytorch'`` on both databases alike; NULL for a suite that
    # trains with no selectable framework (the micro-benchmarks). Migration 0005.
    framework: Mapped[str | None] = mapped_column(String(40), nullable=True)


class Execution(Base):
    __tablename__ = "executions"
    # environment_id + benchmark_id: a case's history on one environment (migration 0004).
    __table_args__ = (Index(None, "benchmark_id", "platform"), Index(None, "environment_id", "benchmark_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(64), unique=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmarks.id"))
    platform: Mapped[str] = mapped_column(String(40))
    repetition: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16), index=True)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    archive_path: Mapped[str | None] = mapped_column(Text)
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)

    run: Mapped[Run] = relationship(back_populates="executions")
    environment: Mapped[Environment] = relationship()
    benchmark: Mapped[Benchmark] = relationship()
    samples: Mapped[list[Sample]] = relationship(back_populates="execution", cascade="all, delete-orphan",
                                                 order_by="Sample.ordinal")


class Sample(Base):
    __tablename__ = "samples"
    __table_args__ = (UniqueConstraint("execution_id", "ordinal"), Index(None, "metric", "execution_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    metric: Mapped[str] = mapped_column(String(120))
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(40))
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)

    execution: Mapped[Execution] = relationship(back_populates="samples")


class ChangeAck(Base):
    """An accepted change of one case history's level (``dlbench baseline ack``): from ``run_pk``
    on, the history's earlier runs are no baseline (migration 0006)."""

    __tablename__ = "change_acks"
    __table_args__ = (UniqueConstraint("history", "run_pk"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    history: Mapped[str] = mapped_column(String(64), index=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    acknowledged_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    note: Mapped[str | None] = mapped_column(Text)


class BaselinePin(Base):
    """A run named as the regression baseline (``dlbench baseline pin``, the explorer): for one
    suite, or for every suite (``scope = "*"``). Migration 0004."""

    __tablename__ = "baseline_pins"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    scope: Mapped[str] = mapped_column(String(60), unique=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    pinned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    note: Mapped[str | None] = mapped_column(Text)

    run: Mapped[Run] = relationship()
