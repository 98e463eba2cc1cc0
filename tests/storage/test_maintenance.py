"""Maintenance on real Delta tables: acknowledged rows go, backlog and replay stay, old generations go."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.runtime import maintenance
from sharedsub.storage import schemas
from sharedsub.storage.backlog import subscription_backlog
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import latest_version, read_commit
from sharedsub.storage.delta.table_maintenance import data_file_count
from sharedsub.storage.delta.table_reads import read_table, snapshot_files
from tests.builders import maintenance_policy, register, subscription

T0 = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)


def _routed_rows(topic: str, seqs: range) -> pa.Table:
    n = len(seqs)
    rows = {
        "topic": [topic] * n,
        "seq": list(seqs),
        "partition": [0] * n,
        "published_at": [T0] * n,
        "routed_at": [T0] * n,
        "size": [100] * n,
    }
    return pa.table({f.name: pa.array(rows.get(f.name, [None] * n), f.type) for f in schemas.SUBSCRIPTION})


def _acks(seqs: list[int], outcome: str) -> pa.Table:
    n = len(seqs)
    return pa.table(
        {
            "seq": pa.array(seqs, pa.int64()),
            "outcome": [outcome] * n,
            "acked_at": pa.array([T0] * n, schemas.TIMESTAMP),
            "consumer": ["c"] * n,
        },
        schema=schemas.ACK,
    )


def _seqs(table: str, version: int | None = None) -> list[int]:
    data = read_table(table, ["seq"], version=version)
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def _setup(root: str, *, commits: int = 20, per_commit: int = 100) -> tuple[str, str, DeltaAppender]:
    """One active subscription with ``commits`` small routed commits; acks for 0..1499 but 700
    (plus a failed delivery of 700 and of 1600, which settle nothing)."""
    (record,) = register(root, subscription("t", name="m"))
    table = layout.join(root, record.table)
    acks = layout.join(root, layout.ack_table_rel(record.key, record.generation))
    appender = DeltaAppender(table, schemas.SUBSCRIPTION)
    for c in range(commits):
        appender.append(_routed_rows("t", range(c * per_commit, (c + 1) * per_commit)))
    ack_appender = DeltaAppender(acks, schemas.ACK)
    ack_appender.append(_acks([s for s in range(1500) if s != 700], "accepted"))
    ack_appender.append(_acks([700, 1600], "failed"))
    return table, acks, appender


def test_acknowledged_rows_below_the_watermark_go_and_the_backlog_stays(tmp_path: str) -> None:
    root = str(tmp_path)
    table, acks, appender = _setup(root)
    before_version = latest_version(table)
    key = os.listdir(os.path.join(root, "subscriptions"))[0]
    backlog_before = subscription_backlog(root, key, 1)
    files_before = data_file_count(table)

    report = maintenance.run_once(root, maintenance_policy(history_retention_hours=168, compact_min_files=5, min_acked_rows=100))

    assert report.errors == 0, report
    assert report.acked_rows_deleted == 700  # 0..699: 700 is unsettled, so nothing above it goes
    assert _seqs(table) == list(range(700, 2000))
    assert _seqs(acks) == sorted([*range(701, 1500), 700, 1600])
    # Pending messages, bytes and age are the same; only the count of rows still held shrank.
    assert [dataclasses.replace(b, routed=0) for b in subscription_backlog(root, key, 1)] == [
        dataclasses.replace(b, routed=0) for b in backlog_before
    ]
    assert data_file_count(table) < files_before and report.files_compacted > 0
    # The delete commit re-added rows 700..799 (rewritten file): a tailer must not see them as new.
    assert all(
        c.added == () for v in range(before_version + 1, latest_version(table) + 1) if (c := read_commit(table, v))
    )
    # Inside the history retention, the old version is still readable (replay, time travel).
    assert _seqs(table, version=before_version) == list(range(2000))
    # The fan-out's cached appender still commits after the maintenance commits (it reloads).
    appender.append(_routed_rows("t", range(2000, 2010)))
    assert _seqs(table)[-10:] == list(range(2000, 2010))


def test_zero_retention_vacuums_the_rewritten_files(tmp_path: str) -> None:
    root = str(tmp_path)
    table, _, _ = _setup(root)
    report = maintenance.run_once(root, maintenance_policy(history_retention_hours=0, compact_min_files=5, min_acked_rows=100))
    assert report.errors == 0, report
    assert report.files_vacuumed > 0
    on_disk = {os.path.join(table, f) for f in os.listdir(table) if f.endswith(".parquet")}
    assert on_disk == set(snapshot_files(table))
    assert _seqs(table) == list(range(700, 2000))


def test_nothing_is_deleted_below_the_minimum_or_without_a_watermark(tmp_path: str) -> None:
    root = str(tmp_path)
    table, _, _ = _setup(root, commits=3)
    report = maintenance.run_once(root, maintenance_policy(compact_min_files=100, min_acked_rows=1000))
    assert report.acked_rows_deleted == 0 and report.files_compacted == 0
    assert _seqs(table) == list(range(300))


def test_old_generations_go_after_the_retention_and_the_current_one_stays(tmp_path: str) -> None:
    root = str(tmp_path)
    old = subscription("t", name="g", generation=1)
    (first,) = register(root, dataclasses.replace(old, created_at=T0))
    DeltaAppender(layout.join(root, first.table), schemas.SUBSCRIPTION).append(_routed_rows("t", range(5)))
    DeltaAppender(layout.join(root, layout.ack_table_rel(first.key, 1)), schemas.ACK).append(_acks([0], "accepted"))
    (second,) = register(root, dataclasses.replace(first, generation=2, created_at=T0 + dt.timedelta(hours=1)))
    DeltaAppender(layout.join(root, second.table), schemas.SUBSCRIPTION).append(_routed_rows("t", range(5, 8)))
    base = os.path.join(root, "subscriptions", first.key)

    soon = maintenance.run_once(root, maintenance_policy(history_retention_hours=24), now=T0 + dt.timedelta(hours=2))
    assert soon.generations_removed == 0 and sorted(os.listdir(base)) == ["acks-g1", "g1", "g2"]

    later = maintenance.run_once(root, maintenance_policy(history_retention_hours=24), now=T0 + dt.timedelta(days=2))
    assert later.generations_removed == 1 and sorted(os.listdir(base)) == ["g2"]
    assert _seqs(layout.join(root, second.table)) == [5, 6, 7]
