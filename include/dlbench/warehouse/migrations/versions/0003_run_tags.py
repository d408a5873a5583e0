"""the run's resource tags (run id, DAG run, expiry) on the run row

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 21:00:00

The archive is self-describing (``run.info.json`` beside the documents: request, DAG, provider,
tags); a warehouse rebuilt from it keeps every run's tags, so a planner can tell which cloud
resources a run held.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN on both SQLite and PostgreSQL: a batch (copy-and-rename) migration
    # would break the sample_facts view on SQLite.
    op.add_column("runs", sa.Column("tags", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE runs DROP COLUMN tags")  # SQLite >= 3.35 and PostgreSQL
