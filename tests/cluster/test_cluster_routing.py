"""Executor routing on a real cluster (local-cluster: executor JVMs of their own): the same rows as
driver routing, and a killed executor costs nothing but orphan files."""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from jobs.routed_rows import by_route, route_rows
from jobs.sources.deltars_topics import ARROW_SCHEMA
from sharedsub.core import layout
from sharedsub.core.fanout.routing import plan_for
from sharedsub.core.fanout.routing_place import Placement
from sharedsub.storage import catalog, schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.table_reads import read_table
from tests import builders as b
from tests.cluster.conftest import EXECUTORS, executor_pids, wait_for_executors
from tests.spark.conftest import make_settings, run_available_now
from tests.spark.test_executor_routing import sink_for, table_rows, the_stream

pytestmark = pytest.mark.spark


def test_executor_routing_on_a_cluster_gives_the_driver_s_rows(cluster: SparkSession, tmp_path: object) -> None:
    base = str(tmp_path)
    driver_root, executors_root = os.path.join(base, "driver", "data"), os.path.join(base, "executors", "data")
    records = the_stream(cluster, driver_root, "driver", selectors=40)
    assert the_stream(cluster, executors_root, "executors-planned", selectors=40) == records
    differing = [r.identity.name for r in records if table_rows(executors_root, r) != table_rows(driver_root, r)]
    assert not differing, f"{len(differing)} subscription tables differ from driver routing, e.g. {differing[:5]}"
    assert sum(len(table_rows(driver_root, r)) for r in records) > 1000


def _publish_many(root: str, topic: str, commits: int, per_commit: int) -> None:
    """``commits`` commits of ``per_commit`` messages with an ``n`` property (0..99) and a key."""
    path = b.topic(root, topic)
    appender = DeltaAppender(path, schemas.TOPIC)
    seq = 0
    for _ in range(commits):
        rows = [
            {
                "seq": seq + i,
                "published_at": b.T0,
                "publisher": "p",
                "routing_key": f"k.{(seq + i) % 7}",
                "partition": 0,
                "size": 8,
                "durable": True,
                "priority": 4,
                "message_id": f"ID:{seq + i}",
                "application_properties": [("n", {"type": "long", "long": (seq + i) % 100})],
                "message": b"m",
            }
            for i in range(per_commit)
        ]
        appender.append(pa.Table.from_pylist(rows, schema=schemas.TOPIC))
        seq += per_commit


def _expected(root: str) -> dict[str, list[int]]:
    """Per subscription table: the seqs driver-side routing gives for everything in the topics."""
    records = tuple(r for r in catalog.load_catalog(root).values() if r.active)
    plan = plan_for(records)
    source = read_table(layout.topic_table(root, "load"), [c for c in ARROW_SCHEMA.names if c != "topic"])
    assert source is not None
    source = source.add_column(0, "topic", pa.array(["load"] * source.num_rows, pa.string()))
    return {
        plan.routes[index].record.table: rows.column("seq").to_pylist()
        for index, rows in by_route(route_rows(plan, source.cast(ARROW_SCHEMA)))
    }


def test_an_executor_killed_while_it_routes_costs_no_row_and_duplicates_none(cluster: SparkSession, root: str) -> None:
    """kill -9 of one executor JVM while the batch's routing tasks run: Spark runs its tasks again
    elsewhere; every subscription gets each of its messages exactly once, in seq order."""
    _publish_many(root, "load", commits=24, per_commit=4000)
    b.register(
        root,
        *(b.subscription("load", name=f"n{i}", selector=f"n >= {i} AND n < {i + 20}") for i in range(0, 100, 10)),
        b.subscription("load", name="keys", binding="k.3"),
    )
    sink = sink_for(cluster, "executors-planned", root)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_available_now(cluster, make_settings(root), sink=sink, timeout=400)
        except BaseException as exc:  # noqa: BLE001 (reported by the test's thread)
            failure.append(exc)

    routing = threading.Thread(target=run)
    routing.start()
    tracker = cluster.sparkContext.statusTracker()
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and routing.is_alive() and time.monotonic() < deadline:
        running = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        if any(info is not None and info.numActiveTasks > 0 for info in running):
            pids = executor_pids(cluster.sparkContext.applicationId)
            assert len(pids) == EXECUTORS
            killed = pids[0]
            os.kill(killed, 9)
        time.sleep(0.05)
    routing.join(420)
    assert not routing.is_alive() and not failure, failure
    assert killed is not None, "no routing task was seen running"
    assert sink.placed[Placement.EXECUTORS] > 0
    expected = _expected(root)
    assert len(expected) == 11 and sum(map(len, expected.values())) > 20_000
    records = {r.table: r for r in catalog.load_catalog(root).values() if r.active}
    for table, seqs in expected.items():
        routed = b.routed_seqs(root, records[table])  # in commit order
        assert len(routed) == len(set(routed)), f"{table}: {len(routed) - len(set(routed))} rows twice"
        assert routed == seqs, table
    wait_for_executors(cluster, EXECUTORS, timeout=120)  # the worker replaced it: the next test has two
