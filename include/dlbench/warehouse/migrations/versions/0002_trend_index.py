"""index for the trend over scheduled runs

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 13:45:00

Planners' second question ("how did this case move week over week?") filters runs on
``scheduled`` and orders them by ``started_at``; this index serves it without a scan.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_scheduled_started_at"), ["scheduled", "started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_scheduled_started_at"))
