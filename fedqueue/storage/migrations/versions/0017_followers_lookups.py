"""followers: ix_followers_follower_uri, and ix_followers_moved_to (only rows with a Move)

Every batch of inbound Follows deletes the follows of accounts that moved to the new
followers (`actor = ? AND moved_to = ?`), and an Undo(Follow), a remote actor's Delete and
an inbox lookup find follows by `follower_uri` alone. The primary key (actor, follower_uri)
served neither: the first read every follower of the actor, the others the whole table, so
each inbound Follow cost more as the followers grew (bench_deployed: 364 Follows/s up to
2,000 followers, 190/s from 2,000 to 12,000). The moved_to index holds only the rows of
followers that moved, so it costs the common insert nothing.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

MOVED = sa.text("moved_to IS NOT NULL")


def upgrade() -> None:
    op.create_index("ix_followers_follower_uri", "followers", ["follower_uri"], unique=False)
    op.create_index(
        "ix_followers_moved_to",
        "followers",
        ["actor", "moved_to"],
        unique=False,
        sqlite_where=MOVED,
        postgresql_where=MOVED,
    )


def downgrade() -> None:
    op.drop_index("ix_followers_moved_to", table_name="followers")
    op.drop_index("ix_followers_follower_uri", table_name="followers")
