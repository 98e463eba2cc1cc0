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

KILL_AFTER = 0.05  # seconds after a routing stage appears; its tasks run ~0.4 s here


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


def _kill_an_executor_once_tasks_run(
    cluster: SparkSession, routing: threading.Thread, deadline: float
) -> tuple[int | None, int | None]:
    """kill -9 one executor while a stage's tasks run; return its pid and the stage's id.

    Spark's status store shows a task as active only when it next refreshes the stage (measured:
    a 400 ms routing stage showed none active for its first 400 ms), so waiting for an active
    task can miss a short stage. A stage's tasks are offered to the idle executors as it is
    submitted: the kill comes ``KILL_AFTER`` seconds after the stage first appears, well within
    its tasks' run (the caller checks afterwards that a task failed with the executor)."""
    tracker = cluster.sparkContext.statusTracker()
    first_seen: dict[int, float] = {}
    while routing.is_alive() and time.monotonic() < deadline:
        now = time.monotonic()
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is None or info.numTasks == 0:
                continue
            seen = first_seen.setdefault(stage, now)
            if info.numActiveTasks > 0 or now - seen >= KILL_AFTER:
                pids = executor_pids(cluster.sparkContext.applicationId)
                assert len(pids) == EXECUTORS
                os.kill(pids[0], 9)
                return pids[0], stage
        time.sleep(0.005)
    return None, None


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
    killed, stage = _kill_an_executor_once_tasks_run(cluster, routing, deadline=time.monotonic() + 300)
    routing.join(420)
    assert not routing.is_alive() and not failure, failure
    assert killed is not None and stage is not None, "no routing stage was seen running"
    info = tracker.getStageInfo(stage)
    assert info is not None and info.numFailedTasks >= 1, f"the kill hit no running task of stage {stage}: {info}"
    assert sink.placed[Placement.EXECUTORS] > 0
    expected = _expected(root)
    assert len(expected) == 11 and sum(map(len, expected.values())) > 20_000
    records = {r.table: r for r in catalog.load_catalog(root).values() if r.active}
    for table, seqs in expected.items():
        routed = b.routed_seqs(root, records[table])  # in commit order
        assert len(routed) == len(set(routed)), f"{table}: {len(routed) - len(set(routed))} rows twice"
        assert routed == seqs, table
    wait_for_executors(cluster, EXECUTORS, timeout=120)  # the worker replaced it: the next test has two
