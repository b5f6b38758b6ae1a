"""The backlog samples table, as a SQLModel table. Only the storage package imports this.

One row per lane per sample: how many deliveries were due and how long the oldest had waited,
written by the workers' heartbeats at most once a minute each (`outbound.heartbeat`), read per
bucket by the console's history page and pruned after `retention_backlog_samples_days`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Float, Index, Integer, SmallInteger
from sqlmodel import Field, SQLModel

from fedqueue.storage.column_types import BigId, UTCDateTime


class BacklogSampleRow(SQLModel, table=True):
    """One lane's backlog at one moment: the deliveries due, and the oldest one's wait."""

    __tablename__ = "backlog_samples"
    __table_args__ = (Index("ix_backlog_samples_at", "at"),)

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True, autoincrement=True))
    at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    lane: int = Field(sa_column=Column(SmallInteger, nullable=False))
    due: int = Field(sa_column=Column(Integer, nullable=False))
    oldest_due_age_seconds: float = Field(sa_column=Column(Float, nullable=False))
