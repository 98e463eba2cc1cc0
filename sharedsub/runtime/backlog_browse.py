"""Browse a subscription's backlog page by page, filtered by a JMS selector (the console's
``/console/api/browse``): reads of the generation table, its ack log and the topic rows.

What a page holds is decided by sharedsub.core.ops.backlog_page; this module reads. The topic rows
of the pending seqs are read in chunks of :data:`CHUNK` (the files that hold them, through the
topic's seq index, without the ``message`` column: a page shows properties and headers, not
bodies), and no request looks at more than ``max_scan`` rows, however long the backlog.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sharedsub.core import layout
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.backlog_page import pending_after, take_page
from sharedsub.core.selector import parse_selector
from sharedsub.core.selector.evaluate import TopicRow
from sharedsub.runtime.inspection import plain_properties
from sharedsub.storage import schemas
from sharedsub.storage.delta.table_reads import read_files, read_table
from sharedsub.storage.payload_index import TopicIndex

CHUNK = 500  # pending seqs whose topic rows one read fetches
MAX_SCAN = 5000  # rows one request looks at, at most
_COLUMNS = [name for name in schemas.TOPIC.names if name != "message"]


@dataclasses.dataclass(frozen=True, slots=True)
class BrowsedPage:
    """A page of messages as the console shows them."""

    messages: list[dict[str, object]]
    next_after: int | None
    scanned: int
    pending: int  # pending seqs after the cursor (the page's and the rest)


def browse_backlog(
    root: str, record: SubscriptionRecord, *, selector: str | None, after: int | None, limit: int, max_scan: int = MAX_SCAN
) -> BrowsedPage:
    """The page of ``record``'s backlog after seq ``after`` whose messages ``selector`` matches
    (sharedsub.core.ops.backlog_page).

    Raises:
        SelectorError: ``selector`` is not a valid JMS selector.
        StorageUnavailable, StoreFailure: the tables could not be read.
    """
    parsed = parse_selector(selector) if selector else None
    routed = read_table(layout.join(root, record.table), ["seq"])
    acks = read_table(layout.join(root, layout.ack_table_rel(record.key, record.generation)), ["seq", "outcome"])
    state = ack_state_of(acks)
    pending = pending_after(routed.column("seq").to_pylist() if routed is not None else (), state.settled, after)
    index = TopicIndex(root, record.topic)
    rows: list[TopicRow] = []
    page = take_page(rows, parsed, limit, max_scan, more_after=bool(pending))
    for start in range(0, min(len(pending), max_scan), CHUNK):
        rows.extend(_topic_rows(index, pending[start : start + CHUNK]))
        more = start + CHUNK < len(pending)
        page = take_page(rows, parsed, limit, max_scan, more_after=more)
        if not more or page.scanned < len(rows) or len(rows) >= max_scan:
            break
    failures = state.delivery_counts
    messages = [_message(row, failures.get(row["seq"], 0)) for row in page.rows]
    return BrowsedPage(messages, page.next_after, page.scanned, len(pending))


def _topic_rows(index: TopicIndex, seqs: list[int]) -> list[TopicRow]:
    """The topic rows of ``seqs``, in seq order (a seq whose row is gone is left out)."""
    data = read_files(list(index.files_for(seqs)), _COLUMNS)
    if data is None:
        return []
    wanted = set(seqs)
    by_seq = {row["seq"]: row for row in data.to_pylist() if row["seq"] in wanted}
    return [by_seq[s] for s in seqs if s in by_seq]


def _text(value: Any) -> object:  # Any: a to_pylist() value
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _message(row: TopicRow, failures: int) -> dict[str, object]:
    """One message of a page, JSON-ready."""
    return {
        "seq": row["seq"],
        "partition": row["partition"],
        "published_at": _text(row["published_at"]),
        "message_id": row["message_id"],
        "correlation_id": row["correlation_id"],
        "subject": row["subject"],
        "priority": row["priority"],
        "durable": row["durable"],
        "size": row["size"],
        "content_type": row["content_type"],
        "delivery_failures": failures,
        "state": "redelivered" if failures else "pending",
        "properties": {k: _text(v) for k, v in plain_properties(row["application_properties"]).items()},
    }
