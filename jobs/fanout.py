"""The fan-out job: route every topic's new messages to the tables of the subscriptions they match.

    python -m jobs.fanout --data-dir D [--config F] [--trigger-interval S] [--available-now] [--checkpoint C]
    spark-submit jobs/fanout.py --data-dir D ...      (PYSPARK_PYTHON must be the venv's python)

One Structured Streaming query: ``readStream.format("sharedsub_topics")`` over all topic tables,
``foreachBatch`` → :class:`FanoutSink`. Per micro-batch the sink re-reads the catalog, collects
the batch's routing columns on the driver with ``toArrow()`` (executors read the topic files),
evaluates binding, selector and no-local of every subscription in one vectorised pass over it
(:meth:`sharedsub.routing.RoutingPlan.route`, the plan compiled once per catalog state), and
makes one Delta commit per subscription table that got rows.

Contracts:

* **Registered before committed ⇒ routed.** The catalog is refreshed inside ``foreachBatch``, i.e.
  after the batch's end offset was fixed; the front end commits a subscription's catalog entry
  (with ``start_seq``) before any message with ``seq >= start_seq``, so every such message is in a
  batch whose catalog read sees the subscription.
* **Exactly once per subscription table**, whatever happens to the job (replayed batch, crash
  between two tables' commits, lost checkpoint): each commit records the Delta app transaction
  ``(SPARK_APP_ID, highest seq in the table)``, and rows with ``seq`` at or below the recorded
  version are dropped before writing. delta-rs does not reject a repeated app transaction
  (feasibility gotcha 2), so this check is what guarantees it. A subscription table has one topic,
  and batches read each topic in seq order, so that version only grows.
* Rows of a subscription table are appended in ``seq`` order.
* The CLI prints exactly one line, ``sharedsub fanout running``, on stdout once the query has
  started and completed its first trigger (a micro-batch, or an idle check on a restart with
  nothing new); everything else goes to stderr. SIGTERM/SIGINT stop the query gracefully and the
  process exits 0; a failed query exits 1. ``--available-now`` processes what is there and exits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

if __package__ in (None, ""):
    # Run as a script (spark-submit jobs/fanout.py): sys.path[0] is jobs/, not the project root.
    # An installed sharedsub (editable or not) already provides ``jobs``; otherwise add the root.
    import importlib.util

    if importlib.util.find_spec("jobs") is None:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if importlib.util.find_spec("pyarrow") is None or importlib.util.find_spec("sharedsub") is None:
        # spark-submit runs $PYSPARK_DRIVER_PYTHON / $PYSPARK_PYTHON, else "python3" from PATH.
        sys.exit(
            f"jobs/fanout.py: {sys.executable} lacks pyarrow or sharedsub; run spark-submit with "
            "PYSPARK_PYTHON=<project>/.venv/bin/python (or with the venv activated)"
        )

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs.session import build_session
from sharedsub.config import Settings, load_settings
from sharedsub.errors import SharedSubError
from sharedsub.logformat import configure_logging
from sharedsub.routing import ROUTE_COLUMN, RoutingPlan, plan_for
from sharedsub.storage import delta, layout, schemas
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.fanout_stats import StatsRecorder
from sharedsub.storage.spark_source import SOURCE_NAME

READY_LINE = "sharedsub fanout running"
# Commits are I/O bound (a Parquet write and a log put per table): a few threads overlap them.
DEFAULT_COMMIT_THREADS = 4

log = logging.getLogger("sharedsub.fanout")

_SOURCE_COLUMNS = ("topic", *schemas.SUBSCRIPTION_FROM_TOPIC)
_ESCAPED_LITERALS = "spark.sql.parser.escapedStringLiterals"


class FanoutSink:
    """The ``foreachBatch`` function of one fan-out query; holds its catalog reader and appenders.

    Create one per query (the catalog reader applies only new catalog commits on each refresh)
    and :meth:`close` it when the query has stopped. Not for concurrent batches (Spark runs one
    micro-batch at a time per query).
    """

    def __init__(self, root: str, *, commit_threads: int = DEFAULT_COMMIT_THREADS) -> None:
        self.root = root
        self.catalog = CatalogReader(root)
        self._appenders: dict[str, delta.TableAppender] = {}
        self._pool = ThreadPoolExecutor(max_workers=commit_threads, thread_name_prefix="fanout-commit")
        self._warned: set[tuple[str, int]] = set()
        self.stats = StatsRecorder(root)  # read by the /metrics endpoint of serve/frontend

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.route_batch(df, batch_id)

    def close(self) -> None:
        """Stop the commit threads."""
        self._pool.shutdown(wait=True)

    def plan(self) -> RoutingPlan:
        """Routing plan from the catalog as it is now (refreshed); logs records it must skip."""
        plan = plan_for(tuple(self.catalog.active()))
        for skipped in plan.skipped:
            mark = (skipped.record.key, skipped.record.revision)
            if mark not in self._warned:
                self._warned.add(mark)
                log.warning("%s", skipped.reason)
        return plan

    def route_batch(self, df: DataFrame, batch_id: int) -> dict[str, int]:
        """Route one micro-batch of source rows; return rows committed per subscription table.

        Reads the source DataFrame once (it is not cached: every action would read the topic
        files again) and returns at once when no subscription is active. The routed rows of the
        batch are collected on the driver (``toArrow``), so ``max_commits_per_batch`` is what
        bounds the driver's memory (feasibility gotcha 6).
        """
        started = time.monotonic()
        plan = self.plan()
        if not plan.routes:
            log.debug("batch %d: no active subscriptions", batch_id)
            return {}
        source = df.where(F.col("topic").isin(sorted(plan.topics))).toArrow()
        routed = _route(plan, source)
        evaluated = time.monotonic()
        written = self.write_routed(routed, plan, batch_id)
        # One INFO line per batch that routed something; idle batches only at DEBUG.
        log.log(
            logging.INFO if routed.num_rows else logging.DEBUG,
            "batch %d: %d messages, %d routed rows for %d subscriptions in %.0f ms, %d rows committed to %d tables in %.0f ms",
            batch_id,
            source.num_rows,
            routed.num_rows,
            len(plan.routes),
            (evaluated - started) * 1000,
            sum(written.values()),
            len(written),
            (time.monotonic() - evaluated) * 1000,
        )
        self.stats.record(batch_id, source, written, (r.record for r in plan.routes), time.monotonic() - started)
        return written

    def write_routed(self, routed: pa.Table, plan: RoutingPlan, batch_id: int) -> dict[str, int]:
        """Commit ``routed`` (source columns + route index) to the subscription tables.

        Rows already in a table (``seq`` ≤ its app-transaction version) are dropped first, so
        calling this again with the same rows writes nothing. Tables are committed concurrently;
        if any commit fails, the others still finish and the first error is raised (the batch
        is replayed, and the tables that did commit drop their rows then).
        """
        self._forget_unplanned(plan)
        if routed.num_rows == 0:
            return {}
        routed_at = dt.datetime.now(dt.UTC)
        ordered = routed.sort_by([(ROUTE_COLUMN, "ascending"), ("seq", "ascending")])
        jobs: list[tuple[str, pa.Table]] = []
        offset = 0
        # value_counts lists values in order of first appearance: ascending, as ``ordered`` is.
        for entry in pc.value_counts(ordered.column(ROUTE_COLUMN)).to_pylist():
            index, count = int(entry["values"]), int(entry["counts"])
            rows = ordered.slice(offset, count)
            offset += count
            table = layout.join(self.root, plan.routes[index].record.table)
            jobs.append((table, _subscription_rows(rows, routed_at, batch_id)))
        futures = [self._pool.submit(self._commit, table, rows) for table, rows in jobs]
        errors = [e for e in (f.exception() for f in futures) if e is not None]  # waits for all
        if errors:
            raise errors[0]
        return {table: n for (table, _), f in zip(jobs, futures, strict=True) if (n := f.result())}

    def _commit(self, table: str, rows: pa.Table) -> int:
        appender = self._appenders.get(table)
        if appender is None:
            appender = self._appenders[table] = delta.TableAppender(table, schemas.SUBSCRIPTION)
        done = appender.transaction_version(schemas.SPARK_APP_ID)
        if done is not None:
            rows = rows.filter(pc.greater(rows.column("seq"), done))
        if rows.num_rows == 0:
            return 0
        highest = int(pc.max(rows.column("seq")).as_py())
        appender.append(rows, app_transaction=(schemas.SPARK_APP_ID, highest))
        return rows.num_rows

    def _forget_unplanned(self, plan: RoutingPlan) -> None:
        # Appenders of deleted subscriptions hold a loaded DeltaTable each; drop them.
        live = {layout.join(self.root, r.record.table) for r in plan.routes}
        for table in [t for t in self._appenders if t not in live]:
            del self._appenders[table]


def _route(plan: RoutingPlan, source: pa.Table) -> pa.Table:
    """The routed rows of the collected micro-batch ``source`` (source columns + route index)."""
    if source.num_rows == 0:
        empty = source.select(list(_SOURCE_COLUMNS)).slice(0, 0)
        return empty.append_column(ROUTE_COLUMN, pa.array([], pa.int32()))
    return plan.route(source.combine_chunks().to_batches()[0], _SOURCE_COLUMNS)


def _subscription_rows(rows: pa.Table, routed_at: dt.datetime, batch_id: int) -> pa.Table:
    """Rows of schemas.SUBSCRIPTION from routed source rows of one subscription."""
    n = rows.num_rows
    columns: dict[str, Any] = {name: rows.column(name) for name in _SOURCE_COLUMNS}
    columns["routed_at"] = pa.array([routed_at] * n, schemas.TIMESTAMP)
    columns["fanout_batch"] = pa.array([batch_id] * n, pa.int64())
    return pa.table([columns[f.name] for f in schemas.SUBSCRIPTION], names=schemas.SUBSCRIPTION.names).cast(
        schemas.SUBSCRIPTION
    )


def build_fanout_query(
    spark: SparkSession,
    settings: Settings,
    *,
    checkpoint: str | None = None,
    available_now: bool = False,
    sink: FanoutSink | None = None,
) -> StreamingQuery:
    """Start the fan-out query over ``settings.data_dir``; return it running.

    ``checkpoint`` defaults to ``<data>/_checkpoints/fanout``. ``available_now`` processes what
    the topics hold when the query starts (in batches capped by ``max_commits_per_batch``) and
    then stops. The query's :class:`FanoutSink` is ``sink`` if given, else a new one; a caller
    that passes one closes it after the query has stopped (as :func:`main` does).
    """
    root = settings.data_dir
    # routing.sql_string escapes for the default parser mode (backslash escapes); the legacy
    # mode would misread every routing regex. Only set it when needed: setting it logs a
    # deprecation warning.
    if (spark.conf.get(_ESCAPED_LITERALS, "false") or "false").lower() == "true":
        spark.conf.set(_ESCAPED_LITERALS, "false")
    source = (
        spark.readStream.format(SOURCE_NAME)
        .option("data_dir", root)
        .option("max_commits_per_batch", str(settings.fanout.max_commits_per_batch))
        .load()
    )
    writer = (
        source.writeStream.foreachBatch(sink if sink is not None else FanoutSink(root))
        .option("checkpointLocation", checkpoint or layout.fanout_checkpoint(root))
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.fanout.trigger_interval} seconds")
    return writer.start()


def wait_first_trigger(query: StreamingQuery, stop: threading.Event, timeout: float) -> bool:
    """Wait until ``query`` reported its first progress (or ended); False on ``stop``/timeout.

    A progress report is written after a micro-batch completes, and after a trigger found
    nothing new (conf/spark-defaults.conf makes the first idle report immediate).

    Raises:
        pyspark.errors.StreamingQueryException: the query failed before reporting.
    """
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        if query.lastProgress is not None:
            return True
        if not query.isActive:
            query.awaitTermination()  # raises the query's error, if it failed
            return True
        stop.wait(0.1)
    return False


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="jobs.fanout",
        description="Route topic messages to subscription tables (Spark Structured Streaming).",
    )
    parser.add_argument("--data-dir", help="tables root (default: [storage] data_dir)")
    parser.add_argument("--config", help="a sharedsub TOML file on top of conf/sharedsub.toml")
    parser.add_argument("--trigger-interval", type=float, help="seconds between micro-batches (0 = back to back)")
    parser.add_argument("--available-now", action="store_true", help="route what is there now, then exit 0")
    parser.add_argument("--checkpoint", help="Spark checkpoint dir (default: <data-dir>/_checkpoints/fanout)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fan-out until stopped (or, with ``--available-now``, until caught up)."""
    args = _parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per foreachBatch call
    try:
        settings = load_settings(
            args.config,
            os.environ,
            {"storage.data_dir": args.data_dir, "fanout.trigger_interval": args.trigger_interval},
        )
    except SharedSubError as exc:
        print(f"jobs.fanout: {exc.description}", file=sys.stderr)
        return 2
    configure_logging(settings.log.level, settings.log.format)  # [log] / SHAREDSUB_LOG_* (serve passes its flags so)

    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("%s: stopping the fan-out", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    log.info("starting: data dir %s, master %s", settings.data_dir, settings.fanout.spark_master)
    spark = build_session(settings)
    sink = FanoutSink(settings.data_dir)
    query: StreamingQuery | None = None
    try:
        query = build_fanout_query(
            spark, settings, checkpoint=args.checkpoint, available_now=args.available_now, sink=sink
        )
        if wait_first_trigger(query, stop, settings.fanout.startup_timeout):
            print(READY_LINE, flush=True)
        elif not stop.is_set():
            log.error("no micro-batch within %.0f s (fanout.startup_timeout)", settings.fanout.startup_timeout)
            return 1
        while not stop.is_set() and query.isActive:
            stop.wait(0.5)  # the signal handler sets ``stop``, which wakes this at once
        if query.isActive:
            query.stop()
        query.awaitTermination()  # raises the query's error, if it failed
        log.info("stopped")
        return 0
    except Exception:
        log.exception("the fan-out query failed")
        return 1
    finally:
        if query is not None and query.isActive:
            query.stop()
        sink.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
