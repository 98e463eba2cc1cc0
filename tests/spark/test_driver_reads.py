"""``[fanout] driver_reads``: a micro-batch read on the driver from the offsets Spark logged for it
(jobs/sources/deltars_topics.py DriverBatchReader) holds exactly the rows the source's Spark tasks read
for the same batch, batch by batch: capped batches, several topics, a topic created while the
query runs, one dropped and created again. And routing gives the same tables either way."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from jobs.sources.deltars_topics import SOURCE_NAME, DriverBatchReader
from sharedsub.core import layout
from sharedsub.runtime.offline_admin import drop_topic
from tests import builders as b
from tests.spark.conftest import make_settings, run_available_now

pytestmark = pytest.mark.spark


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = table.column_names
    return sorted(tuple(row[c] for c in columns) for row in table.to_pylist())


def _run_both(spark: SparkSession, root: str, checkpoint: str) -> list[tuple[int, int]]:
    """Run the source with AvailableNow; for each batch compare what the tasks read (``toArrow``)
    with what the driver reads. Returns (batch id, rows) of every batch."""
    options = {"data_dir": root, "max_commits_per_batch": "2"}
    reader = DriverBatchReader(checkpoint, options)
    seen: list[tuple[int, int]] = []
    mismatches: list[str] = []

    def compare(df: Any, batch_id: int) -> None:
        by_tasks = df.toArrow()
        topics = set(by_tasks.column("topic").to_pylist()) | set(os.listdir(os.path.join(root, layout.TOPICS_DIR)))
        on_driver = reader.read(batch_id, topics)
        if on_driver.column_names != by_tasks.column_names or _rows(on_driver) != _rows(by_tasks):
            mismatches.append(f"batch {batch_id}: tasks {by_tasks.num_rows} rows, driver {on_driver.num_rows}")
        seen.append((batch_id, by_tasks.num_rows))

    query = (
        spark.readStream.format(SOURCE_NAME)
        .options(**options)
        .load()
        .writeStream.foreachBatch(compare)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "available-now query still running after 120 s"
    finally:
        if query.isActive:
            query.stop()
    assert query.exception() is None
    assert not mismatches, mismatches
    return seen


def test_the_driver_reads_what_the_tasks_read_batch_by_batch(spark: SparkSession, root: str, tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    for i in range(5):
        b.publish(root, "a", [f"a.{i}"] * 3)
    b.publish(root, "b", ["b.0", "b.1"])
    first = _run_both(spark, root, checkpoint)
    assert sum(rows for _, rows in first) == 17 and len(first) >= 3  # capped: several batches

    # More rows, a new topic, and a topic dropped and created again, on the same checkpoint.
    b.publish(root, "a", ["a.5"])
    b.publish(root, "c", ["c.0"] * 4)
    drop_topic(root, "b", force=True)
    b.topic(root, "b")
    b.publish(root, "b", ["b.again"])
    second = _run_both(spark, root, checkpoint)
    assert sum(rows for _, rows in second) == 6


def test_routing_is_the_same_with_the_tasks_reading(spark: SparkSession, tmp_path: Path) -> None:
    routed: dict[bool, list[list[int]]] = {}
    for driver_reads in (True, False):
        root = str(tmp_path / f"data-{driver_reads}")
        b.publish(root, "orders", ["eu.new", "us.new", "eu.paid", "eu"])
        subs = b.register(root, b.subscription("orders", name="eu", binding="eu.#"), b.subscription("orders", name="all"))
        run_available_now(spark, make_settings(root, driver_reads=driver_reads))
        b.publish(root, "orders", ["us.late", "eu.late"])
        run_available_now(spark, make_settings(root, driver_reads=driver_reads))
        routed[driver_reads] = [b.routed_seqs(root, s) for s in subs]
    assert routed[True] == routed[False] == [[0, 2, 3, 5], [0, 1, 2, 3, 4, 5]]
