"""Backlog of a subscription generation: routed minus settled-for-good, per partition.

Reads the generation table (``subscriptions/<key>/g<gen>``) and its ack log
(``subscriptions/<key>/acks-g<gen>``) through :mod:`sharedsub.storage.delta.table_reads` (delta-rs, no
Spark), and counts the rows whose seq is not settled for good by the ack log's rule
(:mod:`sharedsub.core.delivery.acklog`: ``accepted``, ``dead-lettered``, ``expired`` settle; ``failed`` rows are
delivery attempts; a ``replayed`` row opens a settled message again until its next
acknowledgement). Only the columns the answer needs are read, never a payload.

Non-durable subscriptions do not persist acknowledgements (they do not outlive the front end),
so for them the result is every routed row: an upper bound.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.storage.delta.table_reads import read_table


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionBacklog:
    """Unacknowledged messages of one partition of a subscription generation."""

    partition: int
    messages: int
    bytes: int  # sum of the messages' encoded sizes
    oldest_published_at: dt.datetime | None  # None when ``messages`` is 0
    routed: int  # rows of this partition the table holds (maintenance removes acknowledged ones)


def compute_backlog(routed: pa.Table | None, acks: pa.Table | None) -> list[PartitionBacklog]:
    """Per-partition backlog from the routed rows (``seq, partition, size, published_at``) and the
    ack log (``seq, outcome``), sorted by partition. Pure: Arrow in, values out."""
    if routed is None or routed.num_rows == 0:
        return []
    done = ack_state_of(acks).settled
    totals = routed.group_by("partition").aggregate([("seq", "count")])
    open_rows = routed.filter(pc.invert(pc.is_in(routed.column("seq"), value_set=pa.array(sorted(done), pa.int64()))))
    pending = open_rows.group_by("partition").aggregate(
        [("seq", "count"), ("size", "sum"), ("published_at", "min")]
    )
    open_by_partition = {
        row["partition"]: row for row in pending.to_pylist()
    }
    out = []
    for row in sorted(totals.to_pylist(), key=lambda r: r["partition"]):
        p = row["partition"]
        got = open_by_partition.get(p)
        out.append(
            PartitionBacklog(
                partition=p,
                messages=got["seq_count"] if got else 0,
                bytes=int(got["size_sum"] or 0) if got else 0,
                oldest_published_at=got["published_at_min"] if got else None,
                routed=row["seq_count"],
            )
        )
    return out


def subscription_backlog(root: str, key: str, generation: int) -> list[PartitionBacklog]:
    """Backlog of generation ``generation`` of subscription ``key`` under data dir ``root``.

    A generation whose table the fan-out has not created yet has no backlog (empty list).
    """
    routed = read_table(
        layout.join(root, layout.generation_table_rel(key, generation)), ["seq", "partition", "size", "published_at"]
    )
    acks = read_table(layout.join(root, layout.ack_table_rel(key, generation)), ["seq", "outcome"])
    return compute_backlog(routed, acks)
