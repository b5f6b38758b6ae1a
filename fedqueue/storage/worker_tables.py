"""The workers' heartbeat table, as a SQLModel table. Only the storage package imports this.

One row per running worker (`fedqueue worker`, or the one inside `serve`), written each
`worker_heartbeat_seconds`; rows whose last beat is older than `worker_forget_seconds` are
removed by the workers that still beat (`WorkerStore.forget_gone`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, Index, Integer, String
from sqlmodel import Field, SQLModel

from fedqueue.storage.column_types import HOST, UTCDateTime


class WorkerRow(SQLModel, table=True):
    """A worker's heartbeat: who it is, when it started, beat and last made progress, what it holds."""

    __tablename__ = "workers"
    __table_args__ = (Index("ix_workers_beat_at", "beat_at"),)

    # The lease owner name (`outbound.worker.worker_id`): host, pid and a random part.
    id: str = Field(sa_column=Column(String(64), primary_key=True))
    host: str = Field(sa_column=Column(HOST, nullable=False))
    pid: int = Field(sa_column=Column(Integer, nullable=False))
    version: str = Field(sa_column=Column(String(32), nullable=False))
    started_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    beat_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    progress_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    in_flight: int = Field(sa_column=Column(Integer, nullable=False))
    # Sends finished and outbox rows expanded, and failed rounds, since it started.
    done: int = Field(sa_column=Column(BigInteger, nullable=False))
    errors: int = Field(sa_column=Column(BigInteger, nullable=False))
