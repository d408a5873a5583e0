"""acknowledged changes: a case's new level, so one change alarms once

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 10:00:00

A regression that an operator has looked at and accepts (a new driver that is slower by design, a
flavor that changed) alarmed on its run and, without this, on every later run whose baseline
window still holds the old level. ``change_acks`` keeps, per case history (a digest of the case,
its platform and its machine class: ``dlbench.reports.analysis.regression.history_key``), the run where
the accepted level starts; later runs are compared with that level only
(docs/regressions.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "change_acks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("history", sa.String(64), nullable=False, index=True),
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.UniqueConstraint("history", "run_pk"),
    )


def downgrade() -> None:
    op.drop_table("change_acks")
