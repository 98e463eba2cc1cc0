"""Routed rows: what routing a batch of topic rows gives, and a subscription table's rows of it.

Shared by the two places a micro-batch is routed: the driver (jobs/batch_routing.py) and Spark's
executors (jobs/executor_routing.py), so both produce the same rows for the same input.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core.fanout.routing import ROUTE_COLUMN, RoutingPlan
from sharedsub.storage import schemas

# The routed rows' columns before the route index: the topic, then what a subscription row takes.
SOURCE_COLUMNS = ("topic", *schemas.SUBSCRIPTION_FROM_TOPIC)


def route_rows(plan: RoutingPlan, source: pa.Table) -> pa.Table:
    """The routed rows of topic rows ``source`` (:data:`SOURCE_COLUMNS` + the route index)."""
    if source.num_rows == 0:
        empty = source.select(list(SOURCE_COLUMNS)).slice(0, 0)
        return empty.append_column(ROUTE_COLUMN, pa.array([], pa.int32()))
    return plan.route(source.combine_chunks().to_batches()[0], SOURCE_COLUMNS)


def by_route(routed: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    """``(route index, its rows in seq order)`` for each route that got rows, in index order."""
    ordered = routed.sort_by([(ROUTE_COLUMN, "ascending"), ("seq", "ascending")])
    offset = 0
    # value_counts lists values in order of first appearance: ascending, as ``ordered`` is.
    for entry in pc.value_counts(ordered.column(ROUTE_COLUMN)).to_pylist():
        index, count = int(entry["values"]), int(entry["counts"])
        yield index, ordered.slice(offset, count)
        offset += count


def subscription_rows(rows: pa.Table, routed_at: dt.datetime, batch_id: int) -> pa.Table:
    """Rows of schemas.SUBSCRIPTION from routed rows of one subscription."""
    n = rows.num_rows
    columns: dict[str, pa.ChunkedArray | pa.Array] = {name: rows.column(name) for name in SOURCE_COLUMNS}
    columns["routed_at"] = pa.array([routed_at] * n, schemas.TIMESTAMP)
    columns["fanout_batch"] = pa.array([batch_id] * n, pa.int64())
    return pa.table([columns[f.name] for f in schemas.SUBSCRIPTION], names=schemas.SUBSCRIPTION.names).cast(
        schemas.SUBSCRIPTION
    )
