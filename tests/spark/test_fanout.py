"""The fan-out job on real local Spark and real Delta tables: routing, idempotency, new topics."""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable

from jobs.executor_routing import ExecutorRouter, worker_setup
from jobs.fanout import HELD_STREAM_CONF, STREAM_CONF, build_fanout_query
from jobs.fanout_sink import FanoutSink
from jobs.sources.deltars_topics import ARROW_SCHEMA, SPARK_SCHEMA, TopicsStreamReader
from jobs.table_commits import TableCommits
from sharedsub.core import layout
from sharedsub.core.fanout.routing_place import Placement
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import Fenced
from sharedsub.storage.fanout_stats import read_stats
from sharedsub.storage.parked_rows import ParkedRows
from tests import builders as b
from tests.spark.conftest import make_settings, run_available_now, wait_until

pytestmark = pytest.mark.spark


def test_routes_two_topics_by_binding_start_seq_and_no_local(spark: SparkSession, root: str) -> None:
    b.publish(root, "orders", ["eu.new", "us.new", "eu.paid.late", "eu"], publisher="shop")
    b.publish(root, "audit", ["x", "y.z"], publisher="container-1")
    subs = b.register(
        root,
        everything := b.subscription("orders", name="everything"),
        one_word := b.subscription("orders", binding="*.new", name="one-word"),
        eu_all := b.subscription("orders", binding="eu.#", name="eu-all"),
        late := b.subscription("orders", binding="#", name="late", start_seq=4),
        own := b.subscription("audit", name="own", no_local=True, namespace="container-1"),
        other := b.subscription("audit", name="other", no_local=True, namespace="container-2"),
    )
    b.publish(root, "orders", ["eu.new"], publisher="shop")  # seq 4
    b.publish(root, "audit", ["x"], publisher="someone")  # seq 2: no-local does not apply
    settings = make_settings(root, max_commits_per_batch=1)  # several batches (AvailableNow + cap)

    run_available_now(spark, settings)

    seqs = {s.identity.name: b.routed_seqs(root, s) for s in subs}
    assert seqs == {
        everything.identity.name: [0, 1, 2, 3, 4],
        one_word.identity.name: [0, 1, 4],
        eu_all.identity.name: [0, 2, 3, 4],
        late.identity.name: [4],
        own.identity.name: [2],
        other.identity.name: [0, 1, 2],
    }
    row = b.routed(root, subs[0])[0]
    assert row["topic"] == "orders" and row["message_id"] == "ID:orders-0" and row["routing_key"] == "eu.new"
    assert row["published_at"] == b.T0 and row["routed_at"] is not None and row["fanout_batch"] >= 0
    assert set(row) == set(schemas.SUBSCRIPTION.names)


def source_frame(spark: SparkSession, root: str) -> Any:
    """Everything the topics under ``root`` hold, as the source would deliver it in one batch."""
    reader = TopicsStreamReader({"data_dir": root, "first_batch_max_commits": "1000000"})
    start = reader.initialOffset()
    parts = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
    table = pa.Table.from_batches([batch for p in parts for batch in reader.read(p)])
    return spark.createDataFrame(table, schema=SPARK_SCHEMA)


def test_replaying_a_batch_writes_nothing_twice(spark: SparkSession, root: str) -> None:
    b.publish(root, "t", ["a", "b", "a"])
    a, every = b.register(root, b.subscription("t", binding="a"), b.subscription("t"))
    frame = source_frame(spark, root)
    sink = FanoutSink(root)
    try:
        first = sink.route_batch(frame, 3)
        again = sink.route_batch(frame, 3)
        # A fresh sink (a restarted job) checks the tables, not its memory.
        fresh = FanoutSink(root)
        try:
            fresh_again = fresh.route_batch(frame, 3)
        finally:
            fresh.close()
    finally:
        sink.close()
    assert sorted(first.values()) == [2, 3]
    assert again == {} and fresh_again == {}
    assert b.routed_seqs(root, a) == [0, 2]
    assert b.routed_seqs(root, every) == [0, 1, 2]
    assert {r["fanout_batch"] for r in b.routed(root, every)} == {3}


def test_a_superseded_fanout_job_cannot_commit_after_the_new_one_fenced_its_tables(spark: SparkSession, root: str) -> None:
    """On object storage each fan-out job writes under its lease's epoch (jobs/fanout.py): the new
    job fences a table before its first commit to it, and the old one (stopped, then resumed)
    fails its next batch there instead of committing or parking. Epochs work alike on a local
    table, where this runs."""
    b.publish(root, "t", ["a", "b"])
    (rec,) = b.register(root, b.subscription("t"))
    frame = source_frame(spark, root)
    old, new = FanoutSink(root, epoch=1), FanoutSink(root, epoch=2)
    try:
        assert list(old.route_batch(frame.where("seq = 0"), 0).values()) == [1]
        assert new.route_batch(frame.where("seq = 0"), 0) == {}  # the same batch again: nothing twice
        with pytest.raises(Fenced):
            old.route_batch(frame.where("seq = 1"), 1)
        assert list(new.route_batch(frame.where("seq = 1"), 1).values()) == [1]
    finally:
        old.close()
        new.close()
    assert b.routed_seqs(root, rec) == [0, 1]
    assert old.tables == {} and not os.path.exists(layout.fanout_pending(root))  # nothing parked


class DiskFull(ParkedRows):
    """Parking that always fails, as on a full disk."""

    def park(self, rel: str, rows: pa.Table, batch_id: int) -> None:
        raise OSError(28, "simulated full disk")


class CrashingCommits(TableCommits):
    """Fails the first commit to one table."""

    def __init__(self, root: str, fail_table: str) -> None:
        super().__init__(root)
        self.fail_table = fail_table
        self.crashed = False

    def commit(self, table: str, rows: pa.Table) -> int:
        if table == self.fail_table and not self.crashed:
            self.crashed = True
            raise RuntimeError("simulated crash in the middle of a fan-out batch")
        return super().commit(table, rows)


class CrashingSink(FanoutSink):
    """Fails the first commit to one table, after the other tables of the batch committed, and
    cannot park its rows either: the batch fails."""

    def __init__(self, root: str, fail_table: str) -> None:
        super().__init__(root, commit_threads=1)
        self.crashing = CrashingCommits(root, fail_table)
        self.commits = self.crashing
        self.parking.parked = DiskFull(root)

    @property
    def crashed(self) -> bool:
        """Whether the commit to the failing table was made (and failed)."""
        return self.crashing.crashed


def test_crash_between_table_commits_and_lost_checkpoint_never_duplicate(spark: SparkSession, root: str) -> None:
    b.publish(root, "t", ["k"] * 3)
    first, second = b.register(root, b.subscription("t", name="first"), b.subscription("t", name="second"))
    settings = make_settings(root)
    run_available_now(spark, settings)
    assert b.routed_seqs(root, first) == b.routed_seqs(root, second) == [0, 1, 2]

    # A batch commits "first"; "second" can be neither committed nor parked: the query fails.
    b.publish(root, "t", ["k"] * 2)
    crashing = CrashingSink(root, layout.join(root, second.table))
    with pytest.raises(Exception, match="simulated full disk"):
        run_available_now(spark, settings, sink=crashing)
    assert crashing.crashed
    assert b.routed_seqs(root, first) == [0, 1, 2, 3, 4]
    assert b.routed_seqs(root, second) == [0, 1, 2]

    # The restart replays that batch from the checkpoint: only "second" gets rows.
    run_available_now(spark, settings)
    assert b.routed_seqs(root, first) == [0, 1, 2, 3, 4]
    assert b.routed_seqs(root, second) == [0, 1, 2, 3, 4]

    # A lost checkpoint restarts from every topic's beginning: still nothing twice.
    shutil.rmtree(layout.fanout_checkpoint(root))
    b.publish(root, "t", ["k"])
    run_available_now(spark, settings)
    assert b.routed_seqs(root, first) == b.routed_seqs(root, second) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("routing", ["driver", "executors"])
def test_a_table_that_cannot_be_written_gets_its_rows_once_in_order_after_it_is_repaired(
    spark: SparkSession, root: str, routing: str
) -> None:
    """Routed on the driver or on the executors (whose files for the broken table are read back
    and parked), the same fault containment."""
    b.publish(root, "t", ["k"] * 3)
    b.publish(root, "u", ["k"] * 2)
    good, broken, other = b.register(
        root, b.subscription("t", name="good"), b.subscription("t", name="broken"), b.subscription("u", name="other")
    )
    # The broken table's log directory is a regular file: creating the table fails.
    log_dir = os.path.join(layout.join(root, broken.table), "_delta_log")
    os.makedirs(os.path.dirname(log_dir))
    with open(log_dir, "w") as fh:
        fh.write("not a directory")
    pending = os.path.join(layout.fanout_pending(root), *broken.table.split("/"))

    router = ExecutorRouter(spark, worker_setup(root, None, os.environ)) if routing == "executors" else None
    sink = FanoutSink(root, retry_interval=3600.0, routing=routing, router=router)  # no retry unless made due
    try:
        written = sink.route_batch(source_frame(spark, root), 0)
        assert sink.placed[Placement(routing)] == 1
        # The others are routed; the broken table's rows are parked, the batch succeeds.
        assert sorted(written.values()) == [2, 3]
        assert b.routed_seqs(root, good) == [0, 1, 2] and b.routed_seqs(root, other) == [0, 1]
        assert len(os.listdir(pending)) == 1
        failing = read_stats(root)["failing"][broken.key]  # type: ignore[index]
        assert (failing["topic"], failing["parked_rows"], failing["failures"]) == ("t", 3, 1)
        assert failing["error"] and failing["since"] > 0

        # A later batch: not due for a retry, so its rows are parked behind the first ones.
        b.publish(root, "t", ["k"] * 2)
        sink.route_batch(source_frame(spark, root).where("seq > 2 AND topic = 't'"), 1)
        assert b.routed_seqs(root, good) == [0, 1, 2, 3, 4]
        assert len(os.listdir(pending)) == 2
        assert read_stats(root)["failing"][broken.key]["parked_rows"] == 5  # type: ignore[index]
    finally:
        sink.close()

    # The job restarts and the table is repaired: the new sink finds the parked rows and retries
    # them between batches, before any new row.
    os.unlink(log_dir)
    fresh = FanoutSink(root, retry_interval=3600.0)
    try:
        assert fresh.tables[broken.table].parked_rows == 5
        assert fresh.tick() is True
        assert b.routed_seqs(root, broken) == [0, 1, 2, 3, 4]
        assert not os.path.exists(pending) and fresh.tables == {}
        assert read_stats(root)["failing"] == {}  # type: ignore[index]
        # Everything again (a replay, a lost checkpoint): nothing twice.
        assert fresh.route_batch(source_frame(spark, root), 2) == {}
        assert b.routed_seqs(root, broken) == [0, 1, 2, 3, 4]
    finally:
        fresh.close()


class RecordingSink(FanoutSink):
    """Remembers what each batch committed."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.batches: list[tuple[int, dict[str, int]]] = []

    def route(self, read: Any, batch_id: int) -> dict[str, int]:
        written = super().route(read, batch_id)
        self.batches.append((batch_id, written))
        return written


def test_replay_of_the_last_batch_after_its_commit_mark_is_lost(spark: SparkSession, root: str) -> None:
    b.publish(root, "t", ["k"] * 2)
    (sub,) = b.register(root, b.subscription("t"))
    settings = make_settings(root)
    run_available_now(spark, settings, sink=(before := RecordingSink(root)))
    commits = os.path.join(layout.fanout_checkpoint(root), "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    # As if the job died right after foreachBatch, before marking the batch committed.
    os.remove(os.path.join(commits, str(last)))
    run_available_now(spark, settings, sink=(after := RecordingSink(root)))
    table = layout.join(root, sub.table)
    assert (last, {table: 2}) in before.batches
    assert after.batches == [(last, {})]  # the batch ran again and wrote nothing
    assert b.routed_seqs(root, sub) == [0, 1]


def test_deleted_subscription_gets_nothing_more(spark: SparkSession, root: str) -> None:
    b.publish(root, "t", ["k"])
    (sub,) = b.register(root, b.subscription("t"))
    settings = make_settings(root)
    run_available_now(spark, settings)
    b.delete(root, sub)
    b.publish(root, "t", ["k"])
    run_available_now(spark, settings)
    assert b.routed_seqs(root, sub) == [0]


def test_topic_created_while_the_query_runs_is_routed(spark: SparkSession, root: str) -> None:
    os.makedirs(root)
    # Batches started at commits ([fanout] start_on_commit): the held query under a trigger of 0
    # takes a topic made while it runs, as the processing-time trigger does (the other tests).
    settings = make_settings(root, trigger_interval=0.2, start_on_commit=True)
    sink = FanoutSink(root)
    query = build_fanout_query(spark, settings, sink=sink)
    try:
        wait_until(lambda: query.lastProgress is not None, timeout=120, what="the first trigger")
        b.topic(root, "late")
        (sub,) = b.register(root, b.subscription("late", binding="x.*"))
        b.publish(root, "late", ["x.1", "y.1", "x.2"])
        assert wait_until(lambda: b.routed_seqs(root, sub), timeout=60, what="rows routed from the new topic") == [0, 2]
        assert query.exception() is None
        # The query's own settings (jobs.fanout.STREAM_CONF, and HELD_STREAM_CONF as its batches
        # start at commits: [fanout] start_on_commit) are in its copy of the session only.
        streaming = query._jsq.streamingQuery().sparkSessionForStream().conf()  # type: ignore[union-attr]
        for key, value in (STREAM_CONF | HELD_STREAM_CONF).items():
            assert streaming.get(key) == value
            assert spark.conf.get(key) != value
    finally:
        query.stop()
        sink.close()


def test_topic_dropped_and_created_again_is_routed_in_full_on_the_same_checkpoint(spark: SparkSession, root: str) -> None:
    from sharedsub.runtime.offline_admin import drop_topic

    for _ in range(4):
        b.publish(root, "t", ["k"] * 2)  # versions 1..4, seqs 0..7
    (old,) = b.register(root, b.subscription("t", name="s"))
    settings = make_settings(root)
    run_available_now(spark, settings)
    assert b.routed_seqs(root, old) == list(range(8))

    # `topics drop --force` deletes the subscription and the table; the job keeps running fine.
    assert drop_topic(root, "t", force=True)["deleted_subscriptions"]
    run_available_now(spark, settings)

    # Created again: fewer commits and seqs than before, a new generation of the subscription.
    b.topic(root, "t")
    (new,) = b.register(root, b.subscription("t", name="s", generation=old.generation + 1))
    b.publish(root, "t", ["k", "k"])  # version 1, seqs 0, 1
    b.publish(root, "t", ["k"])  # version 2, seq 2
    run_available_now(spark, settings)
    assert new.table != old.table
    assert b.routed_seqs(root, new) == [0, 1, 2]
    assert b.routed_seqs(root, old) == list(range(8))


def test_the_gap_before_a_batch_whose_messages_waited_is_timed(root: str) -> None:
    """``fanout_between_batches``: only when the batch's messages were there before the previous
    batch ended (builders publish at T0, long ago: they always were); never for the first."""
    b.publish(root, "t", ["k"] * 3)
    b.register(root, b.subscription("t"))
    reader = TopicsStreamReader({"data_dir": root, "first_batch_max_commits": "1000000"})
    start = reader.initialOffset()
    rows = pa.Table.from_batches(
        [batch for p in reader.partitions(start, reader.latestOffset(start, ReadAllAvailable())) for batch in reader.read(p)]
    )
    sink = FanoutSink(root)
    try:
        sink.route(lambda _topics: rows, 0)
        first = sink.stats.stages.snapshot()
        sink.route(lambda _topics: rows, 1)
        second = sink.stats.stages.snapshot()
    finally:
        sink.close()
    assert "fanout_between_batches" not in first or sum(first["fanout_between_batches"].counts) == 0
    assert sum(second["fanout_between_batches"].counts) == 1


def test_the_main_loop_asks_for_progress_around_batches_and_seldom_when_idle(root: str) -> None:
    """FanoutSink.progress_due (sharedsub.core.fanout.progress_asks): the first look asks; an idle
    sink then says no until IDLE_ASK passes; a routed batch makes it ask again."""
    b.publish(root, "t", ["k"])
    b.register(root, b.subscription("t"))
    sink = FanoutSink(root)
    try:
        assert sink.progress_due() is True
        assert sink.progress_due() is False  # asked just now, nothing routed
        sink.route(lambda _topics: pa.Table.from_pylist([], schema=ARROW_SCHEMA), 0)
        assert sink.progress_due() is True and sink.progress_due() is True  # a batch just ended
    finally:
        sink.close()


P1, P2 = 1 << 40, 2 << 40  # the first seqs of topic partitions 1 and 2 (sharedsub.core.layout)


@pytest.mark.parametrize("routing", ["driver", "executors"])
def test_every_partition_of_a_topic_is_routed_once_from_where_each_subscription_started(
    spark: SparkSession, root: str, routing: str
) -> None:
    """Two front ends' partitions of one topic (and a third made later): each subscription gets
    each partition's rows from its start there, once, and a later row of a lower partition is
    not taken for a replay of a higher one (one exactly-once mark per partition)."""
    b.publish(root, "t", ["a", "b"])  # partition 0: 0, 1
    b.publish(root, "t", ["a"], partition=1)  # partition 1: P1
    every, a_only, late = b.register(
        root,
        b.subscription("t", name="every"),
        b.subscription("t", name="a", binding="a"),
        # saved by the front end of partition 1 after P1, knowing partition 0 up to 1
        dataclasses.replace(b.subscription("t", name="late", start_seq=P1 + 1), start_seqs=((0, 2),)),
    )
    b.publish(root, "t", ["a"], partition=1)  # P1 + 1
    b.publish(root, "t", ["b"])  # 2
    b.publish(root, "t", ["a"], partition=2)  # P2: a partition made after every subscription

    router = ExecutorRouter(spark, worker_setup(root, None, os.environ)) if routing == "executors" else None
    sink = FanoutSink(root, routing=routing, router=router)
    try:
        sink.route_batch(source_frame(spark, root), 0)
        assert sink.placed[Placement(routing)] == 1
        assert sorted(b.routed_seqs(root, every)) == [0, 1, 2, P1, P1 + 1, P2]
        assert sorted(b.routed_seqs(root, a_only)) == [0, P1, P1 + 1, P2]
        assert sorted(b.routed_seqs(root, late)) == [2, P1 + 1, P2]
        rows = {r["seq"]: r for r in b.routed(root, every)}
        assert (rows[P1]["partition"], rows[P2]["partition"], rows[P1]["message_id"]) == (1, 2, f"ID:t-{P1}")

        # A replay commits nothing; a newer row of partition 0 after partition 2's is routed.
        assert sink.route_batch(source_frame(spark, root), 1) == {}
        (three,) = b.publish(root, "t", ["a"])
        assert three == 3
        sink.route_batch(source_frame(spark, root).where("seq = 3"), 2)
    finally:
        sink.close()
    assert sorted(b.routed_seqs(root, every)) == [0, 1, 2, 3, P1, P1 + 1, P2]
    assert sorted(b.routed_seqs(root, a_only)) == [0, 3, P1, P1 + 1, P2]


def test_the_query_reads_each_partition_of_a_topic_as_its_own_table(spark: SparkSession, root: str) -> None:
    """The source's offsets name each partition's table (a topic's name for partition 0, as
    before partitions existed): capped batches over both, then new commits of each, all once."""
    b.publish(root, "t", ["k"] * 2)
    b.publish(root, "t", ["k"], partition=1)
    (every,) = b.register(root, b.subscription("t", name="every"))
    settings = make_settings(root, max_commits_per_batch=1)
    run_available_now(spark, settings)
    assert sorted(b.routed_seqs(root, every)) == [0, 1, P1]
    b.publish(root, "t", ["k"], partition=1)
    b.publish(root, "t", ["k"])
    run_available_now(spark, settings)
    assert sorted(b.routed_seqs(root, every)) == [0, 1, 2, P1, P1 + 1]
    offsets = os.path.join(layout.fanout_checkpoint(root), "offsets")
    last = max((n for n in os.listdir(offsets) if n.isdigit()), key=int)
    with open(os.path.join(offsets, last)) as fh:
        assert '"t~p1":' in fh.read()


def test_the_tables_a_batch_wrote_are_announced_each_once_and_none_when_nothing_was_new(spark: SparkSession, root: str) -> None:
    """What ``--announce-routed`` prints (sharedsub.core.fanout.routed_tables): the tables that
    got rows, in chunks as their commits end, so that serve's tailer probes those (and reads
    the first while the rest are committed); a replayed batch writes nothing and says nothing."""
    b.publish(root, "t", ["a", "b", "a"])
    subs = b.register(root, *(b.subscription("t", binding="a" if i % 2 else "b", name=f"s{i}") for i in range(12)))
    frame = source_frame(spark, root)
    announced: list[list[str]] = []
    sink = FanoutSink(root, on_routed=lambda tables: announced.append(list(tables)))
    try:
        sink.route_batch(frame, 0)
        chunks = len(announced)
        sink.route_batch(frame, 0)
    finally:
        sink.close()
    tables = [t for chunk in announced for t in chunk]
    assert sorted(tables) == sorted(s.table for s in subs) and len(set(tables)) == len(tables)
    assert chunks >= 1 and len(announced) == chunks  # the replay announced nothing
    for rel in tables:
        assert os.path.isdir(os.path.join(root, rel, "_delta_log")), rel
