"""Read what a data dir's Delta tables hold into an :class:`~tests.crash.invariants.Stored`.

Only through ``sharedsub.storage`` (the one module that does Delta I/O), and read-only, so it can
run while the service is up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa

from sharedsub import outcomes
from sharedsub.model import SubscriptionKey
from sharedsub.storage import delta, layout
from sharedsub.storage.catalog import load_catalog
from tests.crash.invariants import Stored, StoredSubscription


def read_topic(root: str, topic: str) -> list[tuple[int, str | None]]:
    """``(seq, message_id)`` of every row of a topic table (empty when it has none)."""
    data = delta.read_table(layout.topic_table(root, topic), ["seq", "message_id"])
    if data is None:
        return []
    return list(zip(data.column("seq").to_pylist(), data.column("message_id").to_pylist(), strict=True))


def appended_rows(table: str, columns: Sequence[str]) -> pa.Table | None:
    """Every row ever appended to ``table`` (``columns`` only), read commit by commit.

    Not the latest snapshot: maintenance deletes acknowledged rows from subscription tables and
    ack logs (re-adding the rest in commits :func:`delta.read_commit` leaves out) and compacts
    them (adds that change no data), so a snapshot no longer shows what was routed or acked,
    while the log's data-changing adds do.
    """
    parts = []
    for version in range(delta.latest_version(table) + 1):
        commit = delta.read_commit(table, version)
        data = delta.read_files(commit.added, columns) if commit is not None else None
        if data is not None:
            parts.append(data)
    return pa.concat_tables(parts) if parts else None


def routed_seqs(table: str) -> list[int]:
    """Topic seq of every row the fan-out ever appended to a subscription table, one per row."""
    data = appended_rows(table, ["seq"])
    return data.column("seq").to_pylist() if data is not None else []


def read_acks(table: str) -> list[tuple[int, float]]:
    """``(seq, acked_at)`` of every row ever committed to an ack log that settles a message for
    good (a ``failed`` row only counts a failed delivery), ``acked_at`` in seconds since the epoch."""
    data = appended_rows(table, ["seq", "outcome", "acked_at"])
    if data is None:
        return []
    rows = zip(data.column("seq").to_pylist(), data.column("outcome").to_pylist(), data.column("acked_at").to_pylist(), strict=True)
    return [(seq, at.timestamp()) for seq, outcome, at in rows if outcomes.is_final(outcome)]


def read_stored(root: str, topics: Iterable[str], subscriptions: Mapping[str, SubscriptionKey]) -> Stored:
    """Topic rows of ``topics`` and, for each named subscription identity, the rows routed to its
    current generation's table and its ack log (a subscription not in the catalog is left out)."""
    catalog = load_catalog(root)
    subs: dict[str, StoredSubscription] = {}
    for name, identity in subscriptions.items():
        rec = catalog.get(identity.key)
        if rec is None:
            continue
        subs[name] = StoredSubscription(
            generation=rec.generation,
            start_seq=rec.start_seq,
            seqs=routed_seqs(layout.join(root, rec.table)),
            acks=read_acks(layout.join(root, layout.ack_table_rel(rec.key, rec.generation))),
        )
    return Stored(topics={t: read_topic(root, t) for t in topics}, subscriptions=subs)
