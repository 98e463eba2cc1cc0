"""Exactly-once marks of a subscription table, one per topic partition; pure (pyarrow, no I/O).

The fan-out records in each subscription table, in the same commit as the rows, the highest
seq it committed there: a Delta app transaction (``txn``), which a replayed batch reads to drop
what the table holds already. Seqs only grow *within* a topic partition (each partition numbers
its own from ``partition << 40``: sharedsub.core.layout, "Partitions"), so one mark per table
would drop a lower partition's newer rows after a higher partition's commit. Each partition
therefore has its own mark: app id ``<app_id>`` for partition 0 — the id every table written
before partitions existed carries, so their marks keep their meaning — and ``<app_id>-p<k>``
for partition k. A commit carries one mark per partition whose rows it holds
(:func:`rows_to_commit`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout


def transaction_app_id(app_id: str, partition: int) -> str:
    """The app-transaction id of topic partition ``partition``'s rows (module docstring)."""
    return app_id if partition == 0 else f"{app_id}-p{partition}"


def by_partition(rows: pa.Table) -> list[tuple[int, pa.Table]]:
    """``rows`` (with a ``seq`` column) split by the partition each seq was numbered in,
    partitions ascending, each part in the rows' order. One part, ``rows`` itself, when all
    are of one partition (a single front end's case: no copy)."""
    if rows.num_rows == 0:
        return []
    seq = rows.column("seq")
    bounds = pc.min_max(seq).as_py()
    low, high = layout.partition_of_seq(bounds["min"]), layout.partition_of_seq(bounds["max"])
    if low == high:
        return [(low, rows)]
    partitions = pc.shift_right(seq, layout.PARTITION_BITS)
    return [
        (int(p), rows.filter(pc.equal(partitions, p)))
        for p in sorted(pc.unique(partitions).to_pylist())
    ]


def above_marks(rows: pa.Table, marks: dict[int, int]) -> pa.Table:
    """The rows whose seq is above its partition's mark in ``marks`` (a partition without a
    mark keeps all its rows)."""
    parts = [
        part.filter(pc.greater(part.column("seq"), marks[p])) if p in marks else part
        for p, part in by_partition(rows)
    ]
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts) if parts else rows.slice(0, 0)


def rows_to_commit(
    rows: pa.Table, app_id: str, done: Callable[[str], int | None]
) -> tuple[pa.Table | None, list[tuple[str, int]]]:
    """What one commit of ``rows`` (seq order within each partition) to a subscription table
    writes: the rows above their partition's mark, and the marks that commit moves, one
    ``(app-transaction id, highest seq)`` per partition with rows left, partitions ascending.
    ``done(id)``: the table's version of app transaction ``id`` (None: it has none), asked once
    per partition of ``rows``. ``(None, [])`` when the table holds every row already::

        rows' partitions   marks (done)          rows written          marks moved
        ---------------    ------------------    ------------------    ----------------------
        0: 1..5            none                  1..5                  (app, 5)
        0: 1..5            app: 3                4, 5                  (app, 5)
        0: 1..5            app: 5                none                  none
        0: 1, 2; 1: P+1    app: 2, app-p1: none  P+1                   (app-p1, P+1)
    """
    keep: list[pa.Table] = []
    marks: list[tuple[str, int]] = []
    for partition, part in by_partition(rows):
        txn = transaction_app_id(app_id, partition)
        version = done(txn)
        bounds = pc.min_max(part.column("seq")).as_py()
        if version is not None and bounds["max"] <= version:
            continue
        if version is not None and bounds["min"] <= version:
            part = part.filter(pc.greater(part.column("seq"), version))
        keep.append(part)
        marks.append((txn, int(bounds["max"])))  # (the filter drops only rows at or below the mark)
    if not keep:
        return None, []
    return (keep[0] if len(keep) == 1 else pa.concat_tables(keep)), marks
