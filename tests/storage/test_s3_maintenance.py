"""Maintenance and retention on a data dir in a bucket of a real S3 server (versitygw): the same
rules as on a local dir (tests/storage/test_maintenance.py, test_retention.py), with the
fan-out's progress read from the record the job keeps on the store
(sharedsub.core.ops.fanout_progress) instead of a local Spark checkpoint."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime import maintenance
from sharedsub.storage.delta.commit_log import table_id
from sharedsub.storage.delta.table_reads import read_table, snapshot_files
from sharedsub.storage.delta.tables import child_names, data_files
from sharedsub.storage.fanout_progress import read_progress, write_progress
from sharedsub.storage.retention import lowest_retained_seqs
from tests import builders as b
from tests.builders import maintenance_policy
from tests.s3_server import S3Server
from tests.storage.test_retention import NOW, ack, no_compaction, publish_commits, route, topic_seqs


def _rows(root: str, record: SubscriptionRecord) -> list[int]:
    data = read_table(layout.join(root, record.table), ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def _progress(root: str, topics: dict[str, int], *, at: dt.datetime) -> None:
    ids = {t: table_id(layout.topic_table(root, t)) or "" for t in topics}
    write_progress(root, topics, ids, batch=0, at_ms=int(at.timestamp() * 1000))


def test_retention_on_a_bucket_follows_the_fanouts_progress_record(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    root = s3_server.url()
    (volatile, durable) = b.register(
        root, b.subscription("t", name="v|volatile1", durable=False), b.subscription("t", name="d")
    )
    seqs = [s for c in publish_commits(root, "t", 5) for s in c]  # versions 1..5, ten rows each
    for rec in (volatile, durable):
        for part in range(5):  # one small file per commit, as the fan-out writes them
            route(root, rec, seqs[part * 10 : (part + 1) * 10])
    ack(root, volatile, list(range(25)))
    ack(root, durable, list(range(50)))
    policy = no_compaction(min_acked_rows=1, compact_min_files=3, history_retention_hours=0)

    # The fan-out has read the topic's first version only: nothing it has still to route goes
    # (nor the log entries it reads next).
    assert read_progress(root).found is False
    _progress(root, {"t": 0}, at=NOW)
    report = maintenance.run_once(root, policy, now=NOW)
    assert report.errors == 0, report
    assert report.topic_rows_deleted == 0 and topic_seqs(root, "t") == list(range(50))
    # Acknowledged rows went from both subscription tables, and vacuum (retention 0) deleted the
    # files no version needs: on a bucket, by listing and DELETEs.
    assert _rows(root, volatile) == list(range(25, 50)) and _rows(root, durable) == []
    table = layout.join(root, volatile.table)
    assert set(data_files(table)) == set(snapshot_files(table))

    # The fan-out routed versions 1..4 (rows 0..39): rows up to the volatile one's first open row
    # (25) go by whole files; the durable one holds nothing (its files are gone, lowest_retained_seqs
    # reads the bucket's listing).
    assert lowest_retained_seqs(layout.join(root, durable.table)) == {}
    _progress(root, {"t": 4}, at=NOW)
    report = maintenance.run_once(root, policy, now=NOW)
    assert report.errors == 0, report
    assert report.topic_rows_deleted == 20 and topic_seqs(root, "t") == list(range(20, 50))

    # A generation that ended: the non-durable one's tables go once the record was made after
    # the catalog commit that ended it (no batch planned with the old catalog is in flight).
    b.delete(root, volatile)
    later = b.T0 + dt.timedelta(minutes=1)  # it ended at T0: after the grace, inside the retention
    policy = maintenance_policy(history_retention_hours=24)
    ended = dt.datetime.now(dt.UTC)
    _progress(root, {"t": 4}, at=ended - dt.timedelta(minutes=5))  # a record from before the end
    assert maintenance.run_once(root, policy, now=later).generations_removed == 0
    time.sleep(0.01)
    _progress(root, {"t": 4}, at=dt.datetime.now(dt.UTC))
    assert maintenance.run_once(root, policy, now=later).generations_removed == 1
    assert child_names(layout.join(root, layout.SUBSCRIPTIONS_DIR)) == [durable.key]


def test_old_generations_go_from_a_bucket(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    root = s3_server.url()
    (first,) = b.register(root, dataclasses.replace(b.subscription("t", name="g", generation=1), created_at=b.T0))
    route(root, first, [0, 1])
    ack(root, first, [0])
    (second,) = b.register(root, dataclasses.replace(first, generation=2, created_at=b.T0 + dt.timedelta(hours=1)))
    route(root, second, [2])
    base = layout.join(root, layout.SUBSCRIPTIONS_DIR, first.key)
    policy = maintenance_policy(history_retention_hours=24)
    assert maintenance.run_once(root, policy, now=b.T0 + dt.timedelta(hours=2)).generations_removed == 0
    assert child_names(base) == ["acks-g1", "g1", "g2"]
    assert maintenance.run_once(root, policy, now=b.T0 + dt.timedelta(days=2)).generations_removed == 1
    assert child_names(base) == ["g2"] and _rows(root, second) == [2]
