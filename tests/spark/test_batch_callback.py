"""jobs.batch_callback on real local Spark: the callback gets each micro-batch's id, and what it
raises fails the query as ``foreachBatch``'s function would."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from jobs.batch_callback import foreach_batch_id

pytestmark = pytest.mark.spark


def _rows(tmp_path: Path, name: str, batches: int) -> str:
    """A directory of ``batches`` JSON files read as a stream, one file per micro-batch."""
    data = tmp_path / name
    data.mkdir()
    for i in range(batches):
        (data / f"{i}.json").write_text(f'{{"n": {i}}}\n')
    return str(data)


def test_each_micro_batch_id_reaches_the_callback_once(spark: SparkSession, tmp_path: Path) -> None:
    seen: list[int] = []
    source = spark.readStream.schema("n INT").option("maxFilesPerTrigger", 1).json(_rows(tmp_path, "in", 3))
    writer = foreach_batch_id(source.writeStream, seen.append)
    query = writer.option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert query.exception() is None
    assert seen == [0, 1, 2]


def test_what_the_callback_raises_fails_the_query_with_its_message(spark: SparkSession, tmp_path: Path) -> None:
    def fail(batch_id: int) -> None:
        raise RuntimeError(f"no routing for batch {batch_id}")

    source = spark.readStream.schema("n INT").json(_rows(tmp_path, "in", 1))
    writer = foreach_batch_id(source.writeStream, fail)
    query = writer.option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    with pytest.raises(StreamingQueryException, match="no routing for batch 0"):
        query.awaitTermination(120)
