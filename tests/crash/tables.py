"""Read what a data dir's Delta tables hold into an :class:`~tests.crash.invariants.Stored`.

Only through ``sharedsub.storage`` (the one module that does Delta I/O), and read-only, so it can
run while the service is up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.core.delivery import outcomes
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.core.model import SubscriptionKey
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.delta.commit_log import latest_version, read_commit
from sharedsub.storage.delta.table_history import history
from sharedsub.storage.delta.table_reads import read_files, read_seqs, read_table
from sharedsub.storage.delta.tables import table_exists
from tests.crash.invariants import Stored, StoredSubscription


def read_topic(root: str, topic: str) -> list[tuple[int, str | None]]:
    """``(seq, message_id)`` of every row of a topic table (empty when it has none)."""
    data = read_table(layout.topic_table(root, topic), ["seq", "message_id"])
    if data is None:
        return []
    return list(zip(data.column("seq").to_pylist(), data.column("message_id").to_pylist(), strict=True))


def appended_rows(table: str, columns: Sequence[str]) -> pa.Table | None:
    """Every row ever appended to ``table`` (``columns`` only), read commit by commit.

    Not the latest snapshot: maintenance deletes acknowledged rows from subscription tables and
    ack logs (re-adding the rest in commits :func:`commit_log.read_commit` leaves out) and compacts
    them (adds that change no data), so a snapshot no longer shows what was routed or acked,
    while the log's data-changing adds do.
    """
    parts = []
    for version in range(latest_version(table) + 1):
        commit = read_commit(table, version)
        data = read_files(commit.added, columns) if commit is not None else None
        if data is not None:
            parts.append(data)
    return pa.concat_tables(parts) if parts else None


def routed_rows(table: str) -> tuple[list[int], dict[int, int], list[tuple[int, float]]]:
    """What a subscription table's log says, version by version: the topic seq of every row the
    fan-out ever appended (one per row), the version that first appended each seq, and
    ``(seq, commit time)`` of every row a replay appended back (maintenance had deleted it).

    A replay's restore commit carries the maintenance mark like maintenance's own rewrites
    (:func:`commit_log.read_commit` calls none of their rows new); unlike them it only adds rows.
    """
    seqs: list[int] = []
    first: dict[int, int] = {}
    restored: list[tuple[int, float]] = []
    for entry in history(table):
        if not entry.added:
            continue
        commit = read_commit(table, entry.version)
        if commit is not None and commit.added:
            data = read_files(commit.added, ["seq"])
            got = data.column("seq").to_pylist() if data is not None else []
            seqs.extend(got)
            for seq in got:
                first.setdefault(seq, entry.version)
        elif entry.is_append:  # marked and adding rows only: a replay's restore
            data = read_files(entry.added, ["seq"])
            restored.extend((seq, entry.timestamp_ms / 1000) for seq in (data.column("seq").to_pylist() if data else []))
    return seqs, first, restored


def routed_seqs(table: str) -> list[int]:
    """Topic seq of every row the fan-out ever appended to a subscription table, one per row."""
    return routed_rows(table)[0]


def read_ack_rows(table: str) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """``(seq, acked_at)`` of every row ever committed to an ack log that settles a message for
    good (a ``failed`` row only counts a failed delivery), and of every ``replayed`` row (a
    replay opened the message again); ``acked_at`` in seconds since the epoch."""
    data = appended_rows(table, ["seq", "outcome", "acked_at"])
    if data is None:
        return [], []
    rows = zip(
        data.column("seq").to_pylist(), data.column("outcome").to_pylist(), data.column("acked_at").to_pylist(), strict=True
    )
    finals: list[tuple[int, float]] = []
    replayed: list[tuple[int, float]] = []
    for seq, outcome, at in rows:
        if outcomes.is_final(outcome):
            finals.append((seq, at.timestamp()))
        elif outcome == outcomes.AckOutcome.REPLAYED:
            replayed.append((seq, at.timestamp()))
    return finals, replayed


def read_acks(table: str) -> list[tuple[int, float]]:
    """The final rows of :func:`read_ack_rows`."""
    return read_ack_rows(table)[0]


def current_state(table: str, acks: str) -> tuple[list[int], frozenset[int]]:
    """The seqs of a subscription table's current snapshot (one per row) and its backlog: those
    the current ack log does not settle (sharedsub.core.delivery.acklog, as the service counts them).

    The ack log is read first: maintenance deletes a table's rows before their acks, so a delete
    between the two reads cannot make an acknowledged row look open.
    """
    settled = ack_state_of(read_table(acks, ["seq", "outcome"]) if table_exists(acks) else None).settled
    live = read_seqs(table).to_pylist()
    return live, frozenset(seq for seq in live if seq not in settled)


def read_stored(root: str, topics: Iterable[str], subscriptions: Mapping[str, SubscriptionKey]) -> Stored:
    """Topic rows of ``topics`` and, for each named subscription identity, the rows routed to its
    current generation's table and its ack log (their whole history), and the table's current
    snapshot and backlog (a subscription not in the catalog is left out)."""
    catalog = load_catalog(root)
    subs: dict[str, StoredSubscription] = {}
    for name, identity in subscriptions.items():
        rec = catalog.get(identity.key)
        if rec is None:
            continue
        table = layout.join(root, rec.table)
        acks = layout.join(root, layout.ack_table_rel(rec.key, rec.generation))
        live, backlog = current_state(table, acks)
        seqs, routed_in, restored = routed_rows(table)
        finals, replayed = read_ack_rows(acks)
        subs[name] = StoredSubscription(
            generation=rec.generation,
            start_seq=rec.start_seq,
            seqs=seqs,
            acks=finals,
            reopens=replayed + restored,
            routed_in=routed_in,
            live=live,
            backlog=backlog,
        )
    return Stored(topics={t: read_topic(root, t) for t in topics}, subscriptions=subs)
