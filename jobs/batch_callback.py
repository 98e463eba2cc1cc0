"""A ``foreachBatch`` callback that Spark calls with the micro-batch's id only.

pyspark's ``DataStreamWriter.foreachBatch`` wraps its function in ``ForeachBatchFunction``, whose
every call builds a Python ``SparkSession`` and ``DataFrame`` around the JVM's Dataset: a handful
of Py4J round trips and a conversion of the session's options, on both sides of the socket, per
micro-batch. The fan-out's default path (:class:`jobs.fanout_sink.ReadOnDriver`) reads its batch
on the driver and never looks at that DataFrame, and under load it routes ~14 micro-batches a
second (bench/RESULTS.md, issue 43, "the batch's callback and its statistics").

:func:`foreach_batch_id` installs :class:`BatchIdCallback` through the same JVM entry point
pyspark's ``foreachBatch`` uses (``PythonForeachBatchHelper.callForeachBatch``, pyspark as pinned
in setup.py). Contract: the function is called once per micro-batch, on Py4J's callback thread, as
``foreachBatch``'s would be; what it raises fails the micro-batch and the query, as there.
"""

from __future__ import annotations

from collections.abc import Callable

from py4j.java_gateway import JavaObject
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql.streaming.readwriter import DataStreamWriter


class BatchIdCallback:
    """Implements Spark's ``PythonForeachBatchFunction`` for Py4J: calls ``func(batch_id)``."""

    def __init__(self, func: Callable[[int], None]) -> None:
        self.func = func

    def call(self, jdf: JavaObject, batch_id: int) -> None:
        """Spark's call for micro-batch ``batch_id``; ``jdf`` (its Dataset) is left alone."""
        self.func(batch_id)

    class Java:
        """What Py4J tells the JVM this object implements."""

        implements = ["org.apache.spark.sql.execution.streaming.sources.PythonForeachBatchFunction"]


def foreach_batch_id(writer: DataStreamWriter, func: Callable[[int], None]) -> DataStreamWriter:
    """``writer`` with ``func`` called for each micro-batch's id (as ``writer.foreachBatch`` would
    call a function of the batch's DataFrame and id)."""
    gateway = writer._spark.sparkContext._gateway  # noqa: SLF001 (pyspark's own foreachBatch reads the same)
    assert gateway is not None
    helper = gateway.jvm.org.apache.spark.sql.execution.streaming.sources.PythonForeachBatchHelper
    helper.callForeachBatch(writer._jwrite, BatchIdCallback(func))  # noqa: SLF001
    ensure_callback_server_started(gateway)
    return writer
