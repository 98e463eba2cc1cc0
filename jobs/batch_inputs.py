"""A micro-batch's source rows as the fan-out sink asks for them, from wherever they come.

The sink (jobs/fanout_sink.py) asks a batch for its topic files when the driver planned them
(:meth:`BatchInput.parts`), for its rows read here (:meth:`BatchInput.read`: routing on the
driver) or for a Spark DataFrame of them (:meth:`BatchInput.frame`: routing on the executors,
jobs/executor_routing.py); it reads each batch once, and not at all when no subscription is
active. Three kinds: :class:`ReadBatch` (a function's rows: tests, tools), :class:`SparkBatch`
(the DataFrame Spark passes to ``foreachBatch``) and :class:`PlannedBatch` (planned on the
driver from the offsets Spark logged).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol, runtime_checkable

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.sources.deltars_topics import DriverBatchReader, TopicFiles, read_parts


@runtime_checkable
class BatchInput(Protocol):
    """One micro-batch's source rows as the sink asks for them."""

    def parts(self, topics: Collection[str]) -> list[TopicFiles] | None:
        """The batch's topic files of ``topics``, planned on the driver; None when it does not
        plan batches (Spark's source tasks read them)."""

    def read(self, topics: Collection[str], parts: list[TopicFiles] | None) -> pa.Table:
        """The batch's rows of ``topics``, here (``parts``: what :meth:`parts` gave, if called)."""

    def frame(self, topics: Collection[str]) -> DataFrame | None:
        """The batch's rows of ``topics`` as a Spark DataFrame, for the executors (None: none)."""


class ReadBatch:
    """A batch whose rows a function returns (tests, tools): always routed on the driver."""

    def __init__(self, read: Callable[[Collection[str]], pa.Table]) -> None:
        self._read = read

    def parts(self, topics: Collection[str]) -> list[TopicFiles] | None:
        """None: nothing is planned."""
        return None

    def read(self, topics: Collection[str], parts: list[TopicFiles] | None) -> pa.Table:
        """The function's rows."""
        return self._read(topics)

    def frame(self, topics: Collection[str]) -> DataFrame | None:
        """None: the rows exist only here."""
        return None


class SparkBatch:
    """The DataFrame Spark passes to ``foreachBatch``: read on the driver with ``toArrow`` (the
    source's tasks read the files), or routed on the executors in those same tasks."""

    def __init__(self, df: DataFrame) -> None:
        self._df = df

    def parts(self, topics: Collection[str]) -> list[TopicFiles] | None:
        """None: Spark's source plans the batch."""
        return None

    def read(self, topics: Collection[str], parts: list[TopicFiles] | None) -> pa.Table:
        """The batch's rows of ``topics``, collected on the driver."""
        frame = self.frame(topics)
        assert frame is not None
        return frame.toArrow()

    def frame(self, topics: Collection[str]) -> DataFrame | None:
        """The batch's rows of ``topics``."""
        return self._df.where(F.col("topic").isin(sorted(topics)))


class PlannedBatch:
    """A batch the driver plans from the offsets Spark logged (``[fanout] driver_reads``,
    jobs/sources/deltars_topics.DriverBatchReader): read here without a Spark job, or its planned
    files routed on the executors. Spark's DataFrame of the batch is never run, so it is not
    kept (the query passes a one-column one: jobs.fanout.build_fanout_query)."""

    def __init__(self, reader: DriverBatchReader, batch_id: int) -> None:
        self._reader = reader
        self._batch_id = batch_id

    def parts(self, topics: Collection[str]) -> list[TopicFiles] | None:
        """The batch's files of ``topics``, from the logged offsets."""
        return self._reader.plan(self._batch_id, topics)

    def read(self, topics: Collection[str], parts: list[TopicFiles] | None) -> pa.Table:
        """The batch's rows of ``topics``, read here."""
        return read_parts(parts if parts is not None else self._reader.plan(self._batch_id, topics))

    def frame(self, topics: Collection[str]) -> DataFrame | None:
        """None: the executors route the planned files (:meth:`parts`), not a DataFrame."""
        return None
