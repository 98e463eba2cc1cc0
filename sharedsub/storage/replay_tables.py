"""The table side of a replay (sharedsub.core.ops.replay has the rules): read the subscription table's
past, write the ``replayed`` ack-log rows and append back the rows maintenance deleted.

:func:`replay_tables` runs on a worker thread of the service (connectors/amqp/replays.py), never
on the reactor. What it writes, in this order:

1. one ``replayed`` row per message to open again (``ReplayPlan.mark``) in the ack log, with
   ``consumer`` = ``replay@v<start version>``;
2. the rows to restore (``ReplayPlan.restore``: replayed, no longer in the current table) to the
   current table, in one commit marked as not new (sharedsub.storage.delta.table_history.append_restored).

The reads of the plan and both writes happen under the ack log's lock
(sharedsub.storage.ack_log_lock): maintenance deletes no acknowledged rows of this generation
in between, so the plan's view of what is settled and what is in the table still holds when
the marks and the restored rows land.

Both are durable before the service re-delivers anything, so a restart in the middle re-delivers
the replayed messages too (marked redelivered: sharedsub.core.delivery.acklog).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Collection, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from sharedsub.core import layout
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.core.delivery.outcomes import AckOutcome
from sharedsub.core.errors import HistoryUnavailable
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.replay import Commit, ReplayPlan, iso, oldest_available, plan_replay, start_version
from sharedsub.storage import ack_log_lock, schemas
from sharedsub.storage.delta import table_history
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.table_reads import read_seqs, read_table


@dataclasses.dataclass(frozen=True, slots=True)
class ReplayDone:
    """What :func:`replay_tables` did."""

    version: int  # start version (-1: the table's first commit)
    version_at: str | None  # its commit time (ISO-8601)
    latest_version: int
    plan: ReplayPlan  # its ``restore``: the seqs appended back

    @property
    def reopen(self) -> frozenset[int]:
        """Seqs the service must no longer hold as acknowledged."""
        return frozenset(self.plan.reopen)


def _seqs(data: pa.Table | None) -> list[int]:
    return [] if data is None else data.column("seq").to_pylist()


def _rows(sources: Iterable[pa.Table | None], seqs: Collection[int]) -> pa.Table:
    """The subscription rows of ``seqs`` from ``sources`` (first occurrence of each seq)."""
    parts = [
        t.select(schemas.SUBSCRIPTION.names).cast(schemas.SUBSCRIPTION)
        for t in sources
        if t is not None and t.num_rows
    ]
    if not parts:
        return schemas.SUBSCRIPTION.empty_table()
    data = pa.concat_tables(parts)
    data = data.filter(pc.is_in(data.column("seq"), value_set=pa.array(sorted(seqs), pa.int64())))
    first: dict[int, int] = {}
    for i, seq in enumerate(data.column("seq").to_pylist()):
        first.setdefault(seq, i)
    return data.take(pa.array(sorted(first.values()), pa.int64())).sort_by("seq")


def replay_tables(
    root: str,
    record: SubscriptionRecord,
    name: str,
    *,
    version: int | None = None,
    timestamp_ms: int | None = None,
    retention_hours: int,
) -> ReplayDone:
    """Plan and write the table side of replaying ``record``'s current generation (see the
    module docstring); ``name`` is how errors name it. Messages count as settled by the ack
    log alone: the caller has its acknowledgements stored first.

    Raises:
        VersionNotFound, HistoryUnavailable: as :func:`sharedsub.core.ops.replay.start_version`, and
            HistoryUnavailable when the files of a version still in the log were vacuumed.
    """
    table = layout.join(root, record.table)
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    now_ms = int(time.time() * 1000)
    history = [Commit(e.version, e.timestamp_ms) for e in table_history.history(table)]
    start = start_version(
        history, name=name, version=version, timestamp_ms=timestamp_ms, now_ms=now_ms, retention_hours=retention_hours
    )
    try:
        at, after, latest = table_history.read_since(table, start)
    except table_history.HistoryMissing as exc:
        avail = oldest_available(history, now_ms=now_ms, retention_hours=retention_hours)
        wanted = f"version {start}" if version is not None or start < 0 else f"{iso(timestamp_ms or 0)} (version {start})"
        raise HistoryUnavailable(
            name, wanted, avail.version if avail else None, iso(avail.timestamp_ms) if avail else None, retention_hours
        ) from exc
    # The reads, the marks and the restores under the ack log's lock: a maintenance delete in
    # between would take final rows the marks balance (sharedsub.storage.ack_log_lock).
    with ack_log_lock.holding(acks):
        settled = ack_state_of(read_table(acks, ["seq", "outcome"])).settled
        current = read_seqs(table).to_pylist()
        plan = plan_replay(_seqs(at), _seqs(after), current, settled)
        if plan.mark:
            stamp = dt.datetime.now(dt.UTC)
            marks = pa.Table.from_pydict(
                {
                    "seq": list(plan.mark),
                    "outcome": [AckOutcome.REPLAYED.value] * len(plan.mark),
                    "acked_at": [stamp] * len(plan.mark),
                    "consumer": [f"replay@v{start}"] * len(plan.mark),
                },
                schema=schemas.ACK,
            )
            DeltaAppender(acks, schemas.ACK).append(marks)
        if plan.restore:
            table_history.append_restored(table, _rows((at, after), plan.restore), f"replay-restore from version {start}")
    version_at = next((iso(c.timestamp_ms) for c in history if c.version == start), None)
    return ReplayDone(start, version_at, latest, plan)
