"""Executor routing (``[fanout] routing = "executors"``) gives the same rows as driver routing.

One scripted stream is applied, step by step, to four data dirs: routed on the driver, on the
executors from the batches the driver plans (``driver_reads``), on the executors from Spark's
own source tasks (``driver_reads = false``), and on the executors with every table committed in
a Spark task of its own (``task_commit_min_tables = 1``). Every subscription table must hold the same rows in
the same order, column by column (but ``routed_at``, a clock reading). The stream covers
bindings, selectors over every typed property and header (the selector corpus: 500+ distinct
selectors over its messages), start seqs, no-local, messages with a TTL and an expiry time, a
topic created mid-stream, a topic dropped and created again, catalog changes between batches,
and capped batches. Here Spark is ``local[2]``: the executors' tasks run in Spark's Python
workers, with the same code a cluster runs (tests/cluster/ runs it on separate executor JVMs).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from jobs.executor_routing import ExecutorRouter, worker_setup
from jobs.fanout_sink import FanoutSink
from sharedsub.core import layout
from sharedsub.core.fanout.routing_place import Placement
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.offline_admin import drop_topic
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.topics import last_seq
from tests import builders as b
from tests.spark import selector_corpus as corpus
from tests.spark.conftest import make_settings, run_available_now

pytestmark = pytest.mark.spark

MODES = ("driver", "executors-planned", "executors-frame", "executors-tasks")
Routed = dict[str, tuple[str, list[SubscriptionRecord]]]


def corpus_messages() -> list[dict[str, Any]]:
    """The selector corpus's distinct messages (rows of schemas.TOPIC)."""
    seen: dict[str, dict[str, Any]] = {}
    for case in _cases():
        seen.setdefault(repr(sorted(case.message.items())), case.message)
    return list(seen.values())


def _cases() -> list[corpus.Case]:
    return [
        c for name in dir(corpus) if isinstance(v := getattr(corpus, name), list | tuple) for c in v if isinstance(c, corpus.Case)
    ]


def publish_rows(root: str, topic: str, messages: list[dict[str, Any]], *, publisher: str) -> None:
    """Append ``messages`` to ``topic`` in one commit, with seqs and times continuing the topic's."""
    path = b.topic(root, topic)
    first = last_seq(path) + 1
    rows = [
        {
            **m,
            "seq": first + i,
            "published_at": b.T0 + dt.timedelta(seconds=first + i),
            "publisher": publisher,
            "ttl": 60_000 if i % 3 == 0 else None,
            "absolute_expiry_time": int(b.T0.timestamp() * 1000) + i if i % 5 == 0 else m["absolute_expiry_time"],
        }
        for i, m in enumerate(messages)
    ]
    DeltaAppender(path, schemas.TOPIC).append(pa.Table.from_pylist(rows, schema=schemas.TOPIC))


def sink_for(spark: SparkSession, mode: str, root: str) -> FanoutSink:
    if mode == "driver":
        return FanoutSink(root, routing="driver")
    router = ExecutorRouter(spark, worker_setup(root, None, os.environ))
    in_tasks = 1 if mode == "executors-tasks" else 0  # every batch's tables committed in tasks
    return FanoutSink(root, routing="executors", router=router, task_commit_min_tables=in_tasks)


def the_stream(spark: SparkSession, root: str, mode: str, *, selectors: int | None = None) -> list[SubscriptionRecord]:
    """Apply the scripted stream to ``root``, routing with ``mode`` between steps; return every
    subscription record it made (deleted ones included). ``selectors``: how many of the corpus's
    distinct selectors get a subscription (every one when None; a spread of them otherwise)."""
    driver_reads = mode != "executors-frame"

    def route(**fanout: Any) -> None:
        settings = make_settings(root, driver_reads=driver_reads, **fanout)
        sink = sink_for(spark, mode, root)
        run_available_now(spark, settings, sink=sink)
        where = Placement.DRIVER if mode == "driver" else Placement.EXECUTORS
        assert sink.placed[where] > 0 and sum(sink.placed.values()) == sink.placed[where], sink.placed
        assert (sink.tables_committed_in_tasks > 0) is (mode == "executors-tasks")

    messages = corpus_messages()
    texts = sorted({c.selector for c in _cases()})
    if selectors is not None:
        texts = texts[:: max(1, len(texts) // selectors)][:selectors]
    made: list[SubscriptionRecord] = []
    # Step 1: bindings, start seq, no-local, and one subscription per distinct corpus selector.
    b.publish(root, "orders", ["eu.new", "us.new", "eu.paid.late", "eu", None], publisher="shop")
    b.publish(root, "audit", ["x", "y.z"], publisher="container-1")
    publish_rows(root, "props", messages, publisher="container-2")
    made += b.register(
        root,
        b.subscription("orders", name="everything"),
        b.subscription("orders", binding="*.new", name="one-word"),
        b.subscription("orders", binding="eu.#", name="eu-all"),
        b.subscription("orders", binding="#", name="late", start_seq=4),
        b.subscription("audit", name="own", no_local=True, namespace="container-1"),
        b.subscription("audit", name="other", no_local=True, namespace="container-2"),
        b.subscription("props", name="props-own", no_local=True, namespace="container-2"),
        *(b.subscription("props", name=f"sel-{i:03d}", selector=s) for i, s in enumerate(texts)),
    )
    route()
    # Step 2: more messages; a catalog change between batches (one deleted, one added with a
    # selector); a topic created mid-stream; capped batches (one commit per topic and batch).
    b.publish(root, "orders", ["eu.new"], publisher="shop")
    publish_rows(root, "props", messages[::2], publisher="publisher-9")
    everything = made[0]
    made.append(b.delete(root, everything))
    made += b.register(
        root,
        b.subscription("orders", name="priority", selector="JMSPriority > 3 AND JMSDeliveryMode = 'NON_PERSISTENT'"),
        b.subscription("fresh", name="fresh-all"),
    )
    for keys in (["a.b"], ["c"], ["a", "a.b.c"]):
        b.publish(root, "fresh", keys, publisher="shop")
    route(max_commits_per_batch=1)
    # Step 3: a topic dropped and created again, a new generation of its subscription.
    drop_topic(root, "audit", force=True)
    b.topic(root, "audit")
    made += b.register(root, b.subscription("audit", name="other", generation=2, namespace="container-2", no_local=True))
    b.publish(root, "audit", ["x", "y"], publisher="container-2")
    b.publish(root, "audit", ["z"], publisher="someone")
    publish_rows(root, "props", messages[1::3], publisher="container-2")
    route()
    return made


def table_rows(root: str, record: SubscriptionRecord) -> list[dict[str, Any]]:
    """The rows of ``record``'s table in commit order, without the routing clock."""
    return [{k: v for k, v in row.items() if k != "routed_at"} for row in b.routed(root, record)]


@pytest.fixture(scope="module")
def routed_every_way(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[str, list[SubscriptionRecord]]]:
    out = {}
    for mode in MODES:
        root = str(tmp_path_factory.mktemp(mode) / "data")
        out[mode] = (root, the_stream(spark, root, mode))
    return out


def test_the_stream_is_the_same_on_every_path(routed_every_way: Routed) -> None:
    driver_root, records = routed_every_way["driver"]
    assert len(records) > 500
    expected = {r.table: table_rows(driver_root, r) for r in records}
    # The stream is not trivial: most selector subscriptions got rows, and some got none.
    assert sum(len(rows) for rows in expected.values()) > 5000
    assert any(not rows for rows in expected.values()) and sum(1 for rows in expected.values() if rows) > 300
    for mode in MODES[1:]:
        root, theirs = routed_every_way[mode]
        assert [dataclasses.replace(r, revision=0) for r in theirs] == [dataclasses.replace(r, revision=0) for r in records]
        differing = [r.identity.name for r in records if table_rows(root, r) != expected[r.table]]
        assert not differing, f"{mode}: {len(differing)} subscription tables differ from driver routing, e.g. {differing[:5]}"


def test_executor_routing_commits_one_file_set_per_table_and_leaves_no_orphans(
    routed_every_way: Routed,
) -> None:
    """Executor-written files are all named by commits (a clean run leaves none behind)."""
    from sharedsub.storage.delta.table_reads import snapshot_files
    from sharedsub.storage.delta.tables import data_files, table_exists

    root, records = routed_every_way["executors-planned"]
    checked = 0
    for record in {r.table: r for r in records}.values():
        table = layout.join(root, record.table)
        if not table_exists(table):
            continue
        assert sorted(data_files(table)) == sorted(snapshot_files(table)), record.table
        checked += 1
    assert checked > 300


def test_a_replayed_executor_batch_commits_nothing_twice(spark: SparkSession, root: str) -> None:
    """The same batch routed again on the executors (a replay after a crash before Spark
    recorded it) finds every table's app transaction covering it: no row twice, and the files it
    wrote are removed."""
    b.publish(root, "t", ["a", "b", "c"])
    (sub,) = b.register(root, b.subscription("t", name="s", selector="JMSPriority = 4"))
    checkpoint = os.path.join(root, "_checkpoints", "fanout")
    settings = make_settings(root)
    run_available_now(spark, settings, sink=sink_for(spark, "executors-planned", root))
    assert b.routed_seqs(root, sub) == [0, 1, 2]
    # Forget that the batches were done: the next run plans and routes them again.
    commits = os.path.join(checkpoint, "commits")
    for name in os.listdir(commits):
        os.unlink(os.path.join(commits, name))
    run_available_now(spark, settings, sink=sink_for(spark, "executors-planned", root))
    assert b.routed_seqs(root, sub) == [0, 1, 2]
    from sharedsub.storage.delta.table_reads import snapshot_files
    from sharedsub.storage.delta.tables import data_files

    table = layout.join(root, sub.table)
    assert sorted(data_files(table)) == sorted(snapshot_files(table))
