"""A replay and a maintenance run of one subscription generation, interleaved on real Delta tables.

The ack log's rule counts rows (sharedsub.core.delivery.acklog: settled ⇔ final rows > ``replayed`` rows).
Maintenance deletes a settled message's ack rows with its routed row; a replay appends a
``replayed`` row for a message it read as settled. If the delete lands between the replay's
reads and its marks, the ``replayed`` row outlives the final row it balanced: the message is
then open for good, and one re-acknowledgement no longer settles it (the crash scenario
``tests/crash/test_kill_scenarios.py::test_sigkill_during_replays`` ended with such messages in
the backlog). These tests run maintenance on another thread right after the replay's reads.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.core.delivery.acklog import ack_state_of
from sharedsub.runtime import maintenance
from sharedsub.storage import ack_log_lock, schemas
from sharedsub.storage import replay_tables as replay_module
from sharedsub.storage.backlog import subscription_backlog
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.table_reads import read_seqs, read_table
from tests.builders import maintenance_policy, register, subscription

T0 = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
POLICY = maintenance_policy(history_retention_hours=168, min_acked_rows=10, compact_min_files=1000)


def _routed(seqs: range) -> pa.Table:
    n = len(seqs)
    rows = {"topic": ["t"] * n, "seq": list(seqs), "partition": [0] * n, "published_at": [T0] * n, "routed_at": [T0] * n}
    rows["size"] = [100] * n
    return pa.table({f.name: pa.array(rows.get(f.name, [None] * n), f.type) for f in schemas.SUBSCRIPTION})


def _acks(seqs: list[int], outcome: str = "accepted") -> pa.Table:
    n = len(seqs)
    return pa.table(
        {"seq": seqs, "outcome": [outcome] * n, "acked_at": [T0] * n, "consumer": ["c"] * n}, schema=schemas.ACK
    )


def test_maintenance_right_after_a_replays_reads_leaves_every_replayed_message_settled_by_one_acceptance(
    tmp_path: Path, monkeypatch: object
) -> None:
    root = str(tmp_path)
    (record,) = register(root, subscription("t", name="m"))
    table = layout.join(root, record.table)
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    routed = DeltaAppender(table, schemas.SUBSCRIPTION)
    routed.append(_routed(range(0, 50)))  # version 0
    routed.append(_routed(range(50, 100)))
    log = DeltaAppender(acks, schemas.ACK)
    # 0..49 acknowledged and deleted by maintenance: the replay from version 0 restores them.
    log.append(_acks(list(range(50))))
    assert maintenance.run_once(root, POLICY).acked_rows_deleted == 50
    # 50..99 acknowledged since: the replay marks them, and maintenance would delete them now.
    log.append(_acks(list(range(50, 100))))

    runs: list[threading.Thread] = []
    reports: list[maintenance.Report] = []

    def read_then_maintain(path: str) -> pa.Array:
        seqs = read_seqs(path)
        if not runs:  # once: right after the replay read the current table and the ack log
            run = threading.Thread(target=lambda: reports.append(maintenance.run_once(root, POLICY)))
            runs.append(run)
            run.start()
            run.join(3)  # it ends at once unless something makes it wait for the replay
        return seqs

    monkeypatch.setattr(replay_module, "read_seqs", read_then_maintain)  # type: ignore[attr-defined]
    done = replay_module.replay_tables(root, record, "m", version=0, retention_hours=168)
    runs[0].join(60)
    assert not runs[0].is_alive() and reports and reports[0].errors == 0, reports
    assert ack_log_lock.held_entries() == 0

    assert done.reopen == frozenset(range(100)), sorted(done.reopen)
    # The consumers receive every reopened message again and accept it, once.
    log.append(_acks(sorted(done.reopen)))

    state = ack_state_of(read_table(acks, ["seq", "outcome"]))
    assert sorted(set(range(100)) - state.settled) == []
    assert sum(p.messages for p in subscription_backlog(root, record.key, record.generation)) == 0
    # Nothing was lost on the way: every replayed message was in the table to be delivered.
    assert set(range(100)) <= set(read_seqs(table).to_pylist()) | state.settled
