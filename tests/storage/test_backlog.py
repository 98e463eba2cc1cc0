"""Backlog per partition (sharedsub/storage/backlog.py) on real Delta tables in a tmp dir."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.storage import schemas
from sharedsub.storage.backlog import PartitionBacklog, subscription_backlog
from sharedsub.storage.delta.appender import DeltaAppender

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
KEY = "shared-durable~c~s~0123456789"


def _routed(root: str, generation: int, rows: list[tuple[int, int, int]]) -> None:
    """Append (seq, partition, size) rows, published one second apart by seq, in one commit."""
    table: dict[str, list[Any]] = {name: [] for name in schemas.SUBSCRIPTION.names}
    for seq, partition, size in rows:
        for name in schemas.SUBSCRIPTION.names:
            table[name].append(None)
        table["topic"][-1] = "t"
        table["seq"][-1] = seq
        table["partition"][-1] = partition
        table["size"][-1] = size
        table["published_at"][-1] = T0 + dt.timedelta(seconds=seq)
    path = layout.join(root, layout.generation_table_rel(KEY, generation))
    DeltaAppender(path, schemas.SUBSCRIPTION).append(pa.Table.from_pydict(table, schema=schemas.SUBSCRIPTION))


def _acks(root: str, generation: int, rows: list[tuple[int, str]]) -> None:
    path = layout.join(root, layout.ack_table_rel(KEY, generation))
    data = {
        "seq": [s for s, _ in rows],
        "outcome": [o for _, o in rows],
        "acked_at": [T0] * len(rows),
        "consumer": ["c"] * len(rows),
    }
    DeltaAppender(path, schemas.ACK).append(pa.Table.from_pydict(data, schema=schemas.ACK))


def test_backlog_is_routed_minus_final_acks_per_partition(tmp_path: Path) -> None:
    root = str(tmp_path)
    _routed(root, 1, [(0, 0, 10), (1, 1, 20), (2, 0, 30), (3, 1, 40), (4, 0, 50)])
    _routed(root, 1, [(5, 2, 60), (6, 0, 70)])  # a second fan-out commit
    _acks(root, 1, [(0, "accepted"), (1, "accepted"), (3, "dead-lettered")])
    # failed deliveries are not acknowledgements; expired ones are settled for good
    _acks(root, 1, [(2, "failed"), (2, "failed"), (5, "expired"), (6, "rejected")])
    assert subscription_backlog(root, KEY, 1) == [
        PartitionBacklog(partition=0, messages=2, bytes=80, oldest_published_at=T0 + dt.timedelta(seconds=2), routed=4),
        PartitionBacklog(partition=1, messages=0, bytes=0, oldest_published_at=None, routed=2),
        PartitionBacklog(partition=2, messages=0, bytes=0, oldest_published_at=None, routed=1),
    ]


def test_backlog_without_acks_is_everything_routed(tmp_path: Path) -> None:
    root = str(tmp_path)
    _routed(root, 3, [(7, 0, 5), (9, 0, 6)])
    assert subscription_backlog(root, KEY, 3) == [
        PartitionBacklog(partition=0, messages=2, bytes=11, oldest_published_at=T0 + dt.timedelta(seconds=7), routed=2)
    ]


def test_generations_are_separate_and_a_missing_table_has_no_backlog(tmp_path: Path) -> None:
    root = str(tmp_path)
    _routed(root, 1, [(0, 0, 5)])
    _acks(root, 2, [(0, "accepted")])  # an ack of another generation does not count here
    assert subscription_backlog(root, KEY, 1)[0].messages == 1
    assert subscription_backlog(root, KEY, 2) == []
