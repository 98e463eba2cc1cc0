"""Retention on real Delta tables: topic rows go by whole files once routed, unneeded and old; topic
compaction rewrites only routed files; the catalog drops superseded revisions; a non-durable
subscription's tables go at the first run after it ended. The fan-out's progress is a checkpoint
written here in Spark's format (tests/spark/test_retention_fanout.py runs the real job)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sharedsub.core import layout
from sharedsub.core.config import MaintenanceSettings
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime import maintenance
from sharedsub.storage import schemas
from sharedsub.storage.catalog import CatalogReader, load_catalog
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import file_changes, latest_version, read_commit, table_id
from sharedsub.storage.delta.table_reads import read_table, snapshot_files
from sharedsub.storage.payload_index import TableIndex, read_messages
from sharedsub.storage.topics import last_seq
from tests import builders as b
from tests.builders import maintenance_policy

NOW = dt.datetime.now(dt.UTC)  # builders publish at T0 (2026-01-01) + seq seconds: long ago


def checkpoint(root: str, batch: int, topics: dict[str, int], *, committed: bool = True) -> str:
    """Write fan-out checkpoint files as Spark does: ``offsets/<batch>`` (``v1``, metadata, the
    source offset) and, when ``committed``, ``commits/<batch>``. Returns the offsets file."""
    base = layout.fanout_checkpoint(root)
    os.makedirs(os.path.join(base, "offsets"), exist_ok=True)
    os.makedirs(os.path.join(base, "commits"), exist_ok=True)
    ids = {t: table_id(layout.topic_table(root, t)) for t in topics}
    offsets = os.path.join(base, "offsets", str(batch))
    with open(offsets, "w") as fh:
        fh.write("v1\n" + json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}) + "\n")
        fh.write(json.dumps({"topics": topics, "ids": ids}))
    if committed:
        with open(os.path.join(base, "commits", str(batch)), "w") as fh:
            fh.write('v1\n{"nextBatchWatermarkMs":0}')
    return offsets


def publish_commits(root: str, topic: str, commits: int, per_commit: int = 10) -> list[list[int]]:
    return [b.publish(root, topic, ["k"] * per_commit) for _ in range(commits)]


def route(root: str, record: SubscriptionRecord, seqs: list[int]) -> None:
    n = len(seqs)
    rows = {
        "topic": [record.topic] * n, "seq": seqs, "partition": [0] * n, "published_at": [b.T0] * n, "routed_at": [b.T0] * n,
        "size": [8] * n,
    }
    DeltaAppender(layout.join(root, record.table), schemas.SUBSCRIPTION).append(
        pa.table({f.name: pa.array(rows.get(f.name, [None] * n), f.type) for f in schemas.SUBSCRIPTION})
    )


def ack(root: str, record: SubscriptionRecord, seqs: list[int], outcome: str = "accepted") -> None:
    n = len(seqs)
    data = {"seq": seqs, "outcome": [outcome] * n, "acked_at": [b.T0] * n, "consumer": ["c"] * n}
    DeltaAppender(layout.join(root, layout.ack_table_rel(record.key, record.generation)), schemas.ACK).append(
        pa.table(data, schema=schemas.ACK)
    )


def topic_seqs(root: str, topic: str) -> list[int]:
    data = read_table(layout.topic_table(root, topic), ["seq"])
    return sorted(data.column("seq").to_pylist()) if data is not None else []


def no_compaction(**overrides: int) -> MaintenanceSettings:
    return maintenance_policy(
        **{
            "history_retention_hours": 168, "compact_min_files": 1000, "min_acked_rows": 1000, "topic_retention_hours": 0,
            **overrides,
        }
    )


def test_topic_rows_go_by_whole_files_once_routed_and_settled(tmp_path: Path) -> None:
    root = str(tmp_path)
    (rec,) = b.register(root, b.subscription("t", name="volatile", durable=False))
    seqs = [s for c in publish_commits(root, "t", 5) for s in c]  # versions 1..5, ten rows each
    route(root, rec, seqs)
    ack(root, rec, list(range(25)))
    ack(root, rec, [30, 31], "failed")  # a failed delivery settles nothing
    checkpoint(root, 0, {"t": 4})  # the fan-out routed versions up to 4 (rows 0..39)
    table = layout.topic_table(root, "t")
    index = TableIndex(table)
    index.refresh()
    before = latest_version(table)

    report = maintenance.run_once(root, no_compaction(), now=NOW)

    # 25 is the first unsettled row: its file (20..29) and everything above it stay.
    assert report.errors == 0, report
    assert report.topic_rows_deleted == 20 and topic_seqs(root, "t") == list(range(20, 50))
    # The delete removed two files and added none, and it is marked: nothing reads it as new rows.
    deletes = [v for v in range(before + 1, latest_version(table) + 1) if (c := file_changes(table, v)) and c.removes]
    assert len(deletes) == 1
    assert file_changes(table, deletes[0]).added == () and read_commit(table, deletes[0]).added == ()
    # The payload index loaded before still finds what stays (the files of 0..19 are only unlinked
    # from the table; vacuum keeps them for the history retention).
    assert read_messages(index, range(20, 50)) == {s: f"m{s}".encode() for s in range(20, 50)}

    # Everything settled, everything routed: all but the newest file go.
    ack(root, rec, list(range(25, 50)))
    checkpoint(root, 1, {"t": 5})
    report = maintenance.run_once(root, no_compaction(), now=NOW)
    assert report.topic_rows_deleted == 20 and topic_seqs(root, "t") == list(range(40, 50))
    # The front end numbers the next message after the highest seq it finds.
    assert last_seq(table) == 49


def test_nothing_goes_unless_a_committed_batch_routed_it_from_this_table(tmp_path: Path) -> None:
    root = str(tmp_path)
    publish_commits(root, "t", 3)
    policy = no_compaction()
    assert maintenance.run_once(root, policy, now=NOW).topic_rows_deleted == 0  # no checkpoint at all
    checkpoint(root, 0, {"t": 3}, committed=False)  # planned, not committed
    assert maintenance.run_once(root, policy, now=NOW).topic_rows_deleted == 0
    # A committed batch of another table under the same name (dropped and created again).
    base = layout.fanout_checkpoint(root)
    offsets = os.path.join(base, "offsets", "0")
    text = open(offsets).read().replace(table_id(layout.topic_table(root, "t")) or "", "an-older-table")
    with open(offsets, "w") as fh:
        fh.write(text)
    with open(os.path.join(base, "commits", "0"), "w") as fh:
        fh.write('v1\n{"nextBatchWatermarkMs":0}')
    assert maintenance.run_once(root, policy, now=NOW).topic_rows_deleted == 0
    assert topic_seqs(root, "t") == list(range(30))
    checkpoint(root, 1, {"t": 3})
    assert maintenance.run_once(root, policy, now=NOW).topic_rows_deleted == 20  # nobody subscribes


def test_rows_younger_than_the_topic_retention_stay(tmp_path: Path) -> None:
    root = str(tmp_path)
    publish_commits(root, "t", 4)  # published at T0 + seq seconds
    checkpoint(root, 0, {"t": 4})
    now = b.T0 + dt.timedelta(hours=1, seconds=25)
    report = maintenance.run_once(root, no_compaction(topic_retention_hours=1), now=now)
    assert report.topic_rows_deleted == 20 and topic_seqs(root, "t") == list(range(20, 40))


def test_a_durable_subscription_holds_what_its_retained_files_hold(tmp_path: Path) -> None:
    root = str(tmp_path)
    (rec,) = b.register(root, b.subscription("t", name="keeper"))
    seqs = [s for c in publish_commits(root, "t", 4) for s in c]
    route(root, rec, seqs[:20])
    route(root, rec, seqs[20:])
    ack(root, rec, seqs)
    checkpoint(root, 0, {"t": 4})

    # Every row is acknowledged and deleted from the subscription table, but inside the history
    # retention its old files stay: a replay would deliver rows 0.. again from the topic.
    report = maintenance.run_once(root, no_compaction(min_acked_rows=1), now=NOW)
    assert report.acked_rows_deleted == 40 and report.topic_rows_deleted == 0
    assert topic_seqs(root, "t") == seqs

    # Once vacuum dropped them (no history kept), nothing holds the topic rows any more.
    report = maintenance.run_once(root, no_compaction(min_acked_rows=1, history_retention_hours=0), now=NOW)
    assert report.topic_rows_deleted == 30 and topic_seqs(root, "t") == list(range(30, 40))


def test_rows_the_fanout_parked_hold_the_topic(tmp_path: Path) -> None:
    root = str(tmp_path)
    (rec,) = b.register(root, b.subscription("t", name="parked", durable=False))
    publish_commits(root, "t", 4)
    route(root, rec, list(range(10)))
    ack(root, rec, list(range(10)))
    checkpoint(root, 0, {"t": 4})
    pending = os.path.join(layout.fanout_pending(root), *rec.table.split("/"))
    os.makedirs(pending)
    pq.write_table(schemas.SUBSCRIPTION.empty_table(), os.path.join(pending, f"{10:020d}-{3:020d}.parquet"))
    report = maintenance.run_once(root, no_compaction(), now=NOW)
    assert report.topic_rows_deleted == 10 and topic_seqs(root, "t") == list(range(10, 40))


def test_each_partition_of_a_topic_goes_below_its_own_holds(tmp_path: Path) -> None:
    """Two members wrote a topic (partitions 0 and 1, a table each): each partition's rows go by
    whole files below the first row open in that partition, for a non-durable subscription and
    for a durable one whose retained files hold each partition from its lowest seq."""
    root = str(tmp_path)
    p1 = 1 << 40
    (volatile,) = b.register(root, b.subscription("t", name="volatile", durable=False))
    first = [s for c in publish_commits(root, "t", 4) for s in c]  # partition 0: 0..39
    second = [s for _ in range(4) for s in b.publish(root, "t", ["k"] * 10, partition=1)]  # p1..p1+39
    route(root, volatile, first + second)
    ack(root, volatile, first[:15] + second[:35])
    checkpoint(root, 0, {"t": 4, layout.topic_partition_dir("t", 1): 4})

    report = maintenance.run_once(root, no_compaction(), now=NOW)

    assert report.errors == 0, report
    assert topic_seqs(root, "t") == list(range(10, 40))  # 15 is open in partition 0
    part1 = read_table(layout.topic_partition_table(root, "t", 1), ["seq"])
    assert part1 is not None and sorted(part1.column("seq").to_pylist()) == list(range(p1 + 30, p1 + 40))

    # A durable subscription whose table keeps partition 1 from p1 + 5 (and partition 0 from 20).
    (durable,) = b.register(root, b.subscription("t", name="keeper"))
    route(root, durable, [20, 21, p1 + 35])
    route(root, durable, [p1 + 5])  # (a file of its own; the seqs need not be new to the topic)
    ack(root, volatile, first[15:] + second[35:])
    report = maintenance.run_once(root, no_compaction(), now=NOW)
    assert report.errors == 0, report
    assert topic_seqs(root, "t") == list(range(20, 40))
    part1 = read_table(layout.topic_partition_table(root, "t", 1), ["seq"])
    assert part1 is not None and sorted(part1.column("seq").to_pylist()) == list(range(p1 + 30, p1 + 40))


def test_topic_compaction_rewrites_only_routed_files_and_adds_no_rows(tmp_path: Path) -> None:
    root = str(tmp_path)
    (rec,) = b.register(root, b.subscription("t", name="volatile", durable=False))
    commits = publish_commits(root, "t", 20, per_commit=5)  # versions 1..20
    route(root, rec, [s for c in commits for s in c])  # nothing settled: every row is held, none cut
    table = layout.topic_table(root, "t")
    checkpoint(root, 0, {"t": 15})
    index = TableIndex(table)
    index.refresh()
    unrouted = {p for v in range(16, 21) for p in read_commit(table, v).added}
    before = latest_version(table)

    # No history kept: vacuum deletes the compacted originals at once.
    policy = maintenance_policy(history_retention_hours=0, compact_min_files=5, min_acked_rows=1000, topic_retention_hours=168)
    report = maintenance.run_once(root, policy, now=NOW)

    assert report.errors == 0, report
    assert report.files_compacted == 15 and report.topic_rows_deleted == 0
    files = set(snapshot_files(table))
    assert unrouted <= files and len(files) < 20  # the files of versions 16..20 are untouched
    # What the fan-out's source reads of the commits after its offset: only the unrouted appends.
    added = [p for v in range(16, latest_version(table) + 1) for p in read_commit(table, v).added]
    assert set(added) == unrouted
    assert all(read_commit(table, v).added == () for v in range(before + 1, latest_version(table) + 1))
    assert topic_seqs(root, "t") == [s for c in commits for s in c]
    # The index loaded before names files vacuum deleted: it reloads and finds every payload.
    assert not any(os.path.exists(p) for p in index.files_for(range(75)))
    assert read_messages(index, range(100)) == {s: f"m{s}".encode() for s in range(100)}


def test_rows_below_the_cut_go_before_compaction_could_bin_them_with_the_newest(tmp_path: Path) -> None:
    """Compaction would merge every routed file, the newest included, into one file holding the
    topic's highest seq, which always stays: the rows the rules let go must be cut first (the CI
    failure of tests/e2e/test_maintenance.py's topic trim, where a compaction ran first)."""
    root = str(tmp_path)
    (rec,) = b.register(root, b.subscription("t", name="volatile", durable=False))
    seqs = [s for c in publish_commits(root, "t", 4) for s in c]  # versions 1..4, rows 0..39
    route(root, rec, seqs)
    ack(root, rec, list(range(30)))  # 30..39 still open: the subscription holds from 30
    checkpoint(root, 0, {"t": 4})
    policy = maintenance_policy(history_retention_hours=168, compact_min_files=3, min_acked_rows=1000, topic_retention_hours=0)

    report = maintenance.run_once(root, policy, now=NOW)

    assert report.errors == 0, report
    assert report.topic_rows_deleted == 30 and topic_seqs(root, "t") == list(range(30, 40))


def test_superseded_catalog_revisions_go_and_numbering_continues(tmp_path: Path) -> None:
    root = str(tmp_path)
    a = b.subscription("t", name="a")
    plain = b.subscription("t", name="plain#x1", shared=False, durable=False)
    (a1, p1) = b.register(root, a, plain)
    (a2,) = b.register(root, dataclasses.replace(a1, binding="x.#"))
    p2 = b.delete(root, p1)
    (c1,) = b.register(root, b.subscription("t", name="c"))
    tailing = CatalogReader(root)
    before = dict(tailing.refresh())
    now = b.T0 + dt.timedelta(days=30)  # every revision is older than the retention

    report = maintenance.run_once(root, maintenance_policy(history_retention_hours=168, compact_min_files=2), now=now)

    assert report.errors == 0, report
    # a's first revision and the deleted plain consumer (no tables left) go; the newest stay.
    assert report.catalog_revisions_deleted == 3 and report.files_compacted == 2  # what is left: two files
    assert {k: r.revision for k, r in load_catalog(root).items()} == {a2.key: a2.revision, c1.key: c1.revision}
    # A reader tailing the log keeps what it held (the deletes are marked), and both see what follows.
    assert tailing.refresh() == before
    (a3,) = b.register(root, dataclasses.replace(a2, binding="y.#"))
    assert a3.revision == c1.revision + 1 > p2.revision
    assert load_catalog(root)[a.key] == a3 == tailing.refresh()[a.key]


def test_a_non_durable_subscriptions_tables_go_at_the_first_run_after_it_ended(tmp_path: Path) -> None:
    root = str(tmp_path)
    volatile = b.subscription("t", name="v|volatile1", durable=False)
    durable = b.subscription("t", name="d")
    (v1, d1) = b.register(root, volatile, durable)
    b.publish(root, "t", ["k"] * 3)
    for rec in (v1, d1):
        for part in range(3):  # small commits: the active tables are compacted like any other
            route(root, rec, [part])
        ack(root, rec, [0])
    report = maintenance.run_once(root, maintenance_policy(compact_min_files=3), now=NOW)
    assert report.files_compacted >= 4 and report.generations_removed == 0
    b.delete(root, v1)
    b.delete(root, d1)
    later = b.T0 + dt.timedelta(minutes=1)  # both ended at T0: after the grace, inside the retention
    keys = os.path.join(root, "subscriptions")

    # No fan-out checkpoint: the fan-out may route to them with a catalog read before the end.
    assert maintenance.run_once(root, maintenance_policy(), now=later).generations_removed == 0
    # A batch in flight that was planned before the catalog's last commit: still not.
    offsets = checkpoint(root, 0, {"t": 1}, committed=False)
    os.utime(offsets, (0, 0))
    assert maintenance.run_once(root, maintenance_policy(), now=later).generations_removed == 0
    # Nothing in flight: the non-durable one's tables and directory go; the durable one's wait.
    checkpoint(root, 0, {"t": 1})
    assert maintenance.run_once(root, maintenance_policy(), now=later).generations_removed == 1
    assert os.listdir(keys) == [d1.key]
