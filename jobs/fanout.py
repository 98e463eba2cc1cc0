"""The fan-out job: route every topic's new messages to the tables of the subscriptions they match.

    python -m jobs.fanout --data-dir D [--config F] [--trigger-interval S] [--available-now] [--checkpoint C]
    spark-submit jobs/fanout.py --data-dir D ...      (PYSPARK_PYTHON must be the venv's python)

This module is the script (the query, signals, the ready line); the sink that routes and commits
each micro-batch is :class:`jobs.fanout_sink.FanoutSink`, the store of parked rows
:class:`sharedsub.storage.parked_rows.ParkedRows`, the topic sources are in jobs/sources/.

One Structured Streaming query: ``readStream.format("sharedsub_topics")`` over all topic tables,
``foreachBatch`` → :class:`~jobs.fanout_sink.FanoutSink`. Per micro-batch the sink re-reads the catalog, collects
the batch's routing columns on the driver with ``toArrow()`` (executors read the topic files),
evaluates binding, selector and no-local of every subscription in one vectorised pass over it
(:meth:`sharedsub.core.fanout.routing.RoutingPlan.route`, the plan compiled once per catalog state), and
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
  (docs/feasibility.md gotcha 2), so this check is what guarantees it. A subscription table has one topic,
  and batches read each topic in seq order, so that version only grows.
* Rows of a subscription table are appended in ``seq`` order.
* **One failing subscription table does not stop the others.** A table whose commit fails (after
  delta-rs's and the appender's retries) is *failing*: its rows of the batch are *parked*
  (:class:`~sharedsub.storage.parked_rows.ParkedRows`, ``<data>/_fanout/pending/``, fsynced before the batch is reported done),
  later batches park its rows without a commit attempt until ``[fanout] table_retry_interval``
  has passed, and a retry commits the parked rows, then the batch's, so the table still gets
  every row once, in ``seq`` order (the app-transaction check above drops rows a commit already
  holds). Between batches the driver's main thread retries due tables (``FanoutSink.tick``),
  so a repaired table catches up without new messages; a restarted job finds the parked rows on
  disk and retries them at once. Only when rows can be neither committed nor parked (a full
  disk) does the batch fail, as before (Spark retries it; nothing is lost). The rule is
  :mod:`sharedsub.core.fanout.fanout_faults`; failing tables are reported in the statistics file
  (``failing``), read by /health and /metrics, and logged when the fault starts, at most every
  few minutes while it lasts, and when it clears (:mod:`sharedsub.core.ops.logthrottle`).
* The CLI prints exactly one line, ``sharedsub fanout running``, on stdout once the query has
  started and completed its first trigger (a micro-batch, or an idle check on a restart with
  nothing new); everything else goes to stderr. SIGTERM/SIGINT stop the query gracefully and the
  process exits 0; a failed query exits 1. ``--available-now`` processes what is there and exits.
* Exit codes: 0 stopped or caught up; 1 the query failed; 2 invalid settings; 5 (``EXIT_IN_USE``)
  another fan-out job holds the data dir; 6 (``EXIT_EXECUTORS_UNFIT``) the cluster's executors
  cannot run the job: their Python lacks the packages it needs (or has other versions), or no
  executor started within ``startup_timeout``. Checked at start by
  :func:`jobs.executor_check.check_executors`; the job prints one line, ``jobs.fanout: <what,
  where, how to fix>``, and nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, Protocol

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

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from jobs.batch_callback import foreach_batch_id
from jobs.executor_check import check_executors
from jobs.executor_routing import ExecutorRouter, worker_setup
from jobs.fanout_sink import FanoutSink, ReadOnDriver
from jobs.session import build_session, delta_enabled
from jobs.sources.delta_streaming import DeltaTopicQueries, checkpoint_base
from jobs.sources.deltars_topics import SOURCE_NAME, TOPIC_ONLY, DriverBatchReader
from sharedsub.core import layout
from sharedsub.core.config import (
    Settings,
    fanout_batch_max_wait,
    fanout_idle_hold,
    fanout_idle_probe_interval,
    fanout_starts_on_commit,
    fanout_trigger_interval,
    group_commit_interval,
    load_settings,
    on_object_store,
)
from sharedsub.core.errors import DataDirInUse, ExecutorsUnfit, SharedSubError
from sharedsub.core.fanout.change_notes import FANOUT_NOTE, NoteKeeper
from sharedsub.core.fanout.routed_tables import routed_line
from sharedsub.core.layout import local_path
from sharedsub.runtime.cluster.data_dir_owner import DataDirLock, own_fanout
from sharedsub.runtime.discovery import state_home
from sharedsub.runtime.fanout_process import (  # the lines and codes its supervisor reads
    EXIT_EXECUTORS_UNFIT,
    EXIT_INVALID_SETTINGS,
    READY_LINE,
    ROUTED_LINE,
)
from sharedsub.runtime.process import console
from sharedsub.runtime.process.logformat import configure_logging
from sharedsub.storage.change_notes import NotesInBackground, NoteWriter
from sharedsub.storage.objects.locations import register

EXIT_IN_USE = 5  # as serve's for a data dir another front end owns

log = logging.getLogger("sharedsub.fanout")

_ESCAPED_LITERALS = "spark.sql.parser.escapedStringLiterals"


class FanoutQuery(Protocol):
    """What :func:`main` and the tests use of a running fan-out: a ``StreamingQuery``, or with
    ``[fanout] source = "delta"`` one per topic presented as one (jobs.sources.delta_streaming)."""

    @property
    def isActive(self) -> bool:  # noqa: N802 (Spark's name)
        """Whether it is running."""

    @property
    # Any: Spark's progress report: pyspark's StreamingQueryProgress is a dict of JSON values (Dict[str, Any])
    def lastProgress(self) -> dict[str, Any] | None:  # noqa: N802 (Spark's name)
        """Its last progress report (None before the first)."""

    def stop(self) -> None:
        """Stop it."""

    def awaitTermination(self, timeout: int | None = None) -> bool | None:  # noqa: N802 (Spark's name)
        """Wait for it to end; raise its error if it failed."""


def make_sink(
    spark: SparkSession,
    settings: Settings,
    *,
    on_routed: Callable[[Collection[str]], None] | None = None,
    epoch: int | None = None,
) -> FanoutSink:
    """The fan-out's sink for ``settings``: ``[fanout]``'s retry interval and routing, with an
    executor router for ``routing`` other than "driver" (jobs/executor_routing.py); ``on_routed``
    and ``epoch`` as FanoutSink takes them."""
    fanout = settings.fanout
    router = None
    if fanout.routing != "driver":
        router = ExecutorRouter(spark, worker_setup(settings.data_dir, settings.storage.options, os.environ))
    return FanoutSink(
        settings.data_dir,
        retry_interval=fanout.table_retry_interval,
        routing=fanout.routing,
        executor_min_work=fanout.executor_min_work,
        router=router,
        task_commit_min_tables=fanout.task_commit_min_tables,
        on_routed=on_routed,
        epoch=epoch,
    )


def build_fanout_query(
    spark: SparkSession,
    settings: Settings,
    *,
    checkpoint: str | None = None,
    available_now: bool = False,
    sink: FanoutSink | None = None,
) -> FanoutQuery:
    """Start the fan-out query over ``settings.data_dir``; return it running.

    ``[fanout] source`` picks the source: ``deltars`` (default), the ``sharedsub_topics`` Python
    data source over delta-rs, one query over every topic; ``delta``, Delta's own streaming source
    through the connector, one query per topic (:mod:`jobs.sources.delta_streaming`; checkpoints under
    ``<data>/_checkpoints/fanout-delta``), returned as one query look-alike.
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
    if settings.fanout.source == "delta":  # Delta's own streaming source: one query per topic
        if not delta_enabled(spark):
            raise SharedSubError(
                "[fanout] source = \"delta\" needs the Delta Lake Spark connector, which this session lacks "
                "(python3 bootstrap.py setup fetches it into .jars/; under spark-submit pass it with --jars or --packages)"
            )
        return DeltaTopicQueries(
            spark,
            root,
            sink if sink is not None else make_sink(spark, settings),
            checkpoint=checkpoint or checkpoint_base(root),
            max_files=settings.fanout.max_commits_per_batch,
            available_now=available_now,
            trigger_interval=fanout_trigger_interval(settings),
        ).start()
    options = {
        "data_dir": root,
        "max_commits_per_batch": str(settings.fanout.max_commits_per_batch),
        # Held commits count towards a topic's lag once it has a subscription: keep below stalled.
        "unsubscribed_topic_interval": str(
            min(settings.fanout.unsubscribed_topic_interval, settings.fanout.stalled_after / 2)
        ),
    }
    if not on_object_store(settings):  # (on a bucket object_poll_interval paces the batches)
        # (0 when batches start at commits: the front ends' groups waited for company: config.group_company)
        options["batch_max_wait"] = str(fanout_batch_max_wait(settings))
        options["batch_min_rows"] = str(settings.fanout.batch_min_rows)
    held = fanout_starts_on_commit(settings) and not available_now
    if held:
        # Batches start at the front ends' commit signals, at most once per trigger interval;
        # each latestOffset call waits up to that long (sharedsub.core.fanout.batch_hold).
        options["batch_interval"] = str(fanout_trigger_interval(settings))
        options["hold"] = str(fanout_trigger_interval(settings) or HOLD_WITHOUT_INTERVAL)
        # ... and a batch held for the interval waits up to one commit interval for the next commit.
        options["align"] = str(group_commit_interval(settings))
    if not available_now and fanout_idle_hold(settings) > 0:
        # An idle source holds an ask that found nothing until a commit's signal
        # (sharedsub.core.fanout.idle_hold), longer than a held call's hold.
        options["idle_hold"] = str(fanout_idle_hold(settings))
    idle = fanout_idle_probe_interval(settings)
    if idle > 0:  # object storage: every probe is requests (sharedsub.core.ops.poll_backoff)
        options["probe_interval"] = str(fanout_trigger_interval(settings))
        options["idle_probe_interval"] = str(idle)
        options["topic_list_interval"] = str(idle)
        # Only the topic tables the writers' change notes name are probed (and every one at a
        # sweep): an idle topic costs no request (sharedsub.core.fanout.change_notes).
        options["change_notes"] = "true"
    location = checkpoint or layout.fanout_checkpoint(root)
    routing = sink if sink is not None else make_sink(spark, settings)
    local = local_path(location)
    reader = spark.readStream.format(SOURCE_NAME).options(**options)
    if settings.fanout.driver_reads and local is not None:
        # Spark still plans each batch's DataFrame before foreachBatch (analysis, optimisation,
        # its RDD, the Row encoder of every column), though nothing runs it here: one column
        # instead of the source's 25 cut the driver JVM's CPU by a tenth at 100 msg/s
        # (bench/RESULTS.md, issue 43, "the batch's DataFrame, one column"); that column given as
        # the source's schema, not projected, spares the analyser and optimiser a node each batch
        # (a tenth of the driver JVM's CPU again: "the batch's plan without a projection").
        on_driver = ReadOnDriver(routing, DriverBatchReader(local, options))
        writer = foreach_batch_id(reader.schema(TOPIC_ONLY).load().writeStream, on_driver)
    else:
        writer = reader.load().writeStream.foreachBatch(routing)
    writer = writer.option("checkpointLocation", location)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        interval = 0.0 if held else fanout_trigger_interval(settings)
        writer = writer.trigger(processingTime=f"{interval} seconds")
    with stream_conf(spark, STREAM_CONF | (HELD_STREAM_CONF if held else {})):
        return writer.start()


# With start_on_commit and a trigger_interval of 0 (batches back to back), the longest one wait
# for a commit signal lasts: Spark asks again 10 ms after a call that found nothing, so without a
# wait an idle job would probe every topic a hundred times a second.
HOLD_WITHOUT_INTERVAL = 0.1

# The fan-out job's driver JVM (its own session: a notebook's or a test tier's keeps Java's
# defaults) compiles with C1 only, and sooner. Spark's planning code is large and each micro-batch
# walks much of it: with the default tiered compilation the C2 compiler was still compiling ~110
# methods a second after a minute of steady load (~0.2 of a core); with C1 only the job's JVM took
# 0.44 instead of 0.56 of a core at 1k msg/s (back-to-back batches). A profile (perf, with the
# JIT's symbol map) then found a fifth of the JVM's samples in the interpreter: code each
# micro-batch runs a few times stays interpreted for hundreds of batches; compile thresholds at a
# tenth took the JVM from 0.16 to 0.11 of a core at 10 batches a second (bench/RESULTS.md, issue
# 31). C1 alone gets a 48 MB code cache, which Spark's code filled with those thresholds ("Out of
# space in CodeCache for adapters", a fatal error, in a notebook's session): the tiered default,
# 240 MB, is reserved. Without performance data (-XX:-UsePerfData: jps and jstat do not see the
# JVM; jcmd PID still does) no thread samples its counters every 50 ms: ~0.003 of an idle job's
# ~0.05 cores (bench/RESULTS.md, issue 43). Under spark-submit the driver JVM is already running:
# pass these with --driver-java-options. On a cluster the executors keep the defaults: they run
# the long tasks.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=0.1 -XX:ReservedCodeCacheSize=240m -XX:-UsePerfData"
DRIVER_CONF = {"spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS}

# SQL settings of the fan-out's query only (a query runs in a copy of the session made when it
# starts), not of the session a notebook or test tier shares with it. The "delta" source's
# queries keep them: their batches run in the JVM, where generated code pays off.
STREAM_CONF = {
    # Spark plans every micro-batch's DataFrame into an RDD before it calls foreachBatch, which
    # generates Java code for it each time (WholeStageCodegenExec.doCodeGen: a quarter of the
    # query thread's samples in a JFR profile of the latency bench); the fan-out never runs
    # that plan on the driver's default path, and elsewhere reads files in Python.
    "spark.sql.codegen.wholeStage": "false",
    # Every micro-batch runs under a new SQL execution id, whose start event carries the plan
    # described for the UI, in the "formatted" mode by default (ExplainUtils, one line per
    # operator with its id: seen in a JFR profile of the 1k msg/s bench). The job's UI is off
    # (spark-defaults.conf); the short form costs less and says the same to a listener.
    "spark.sql.ui.explainMode": "simple",
}

# With batches started at commits (held latestOffset calls: sharedsub.core.fanout.batch_hold),
# Spark's wait after a call that found nothing (spark-defaults.conf: 50 ms, which bounds an idle
# job's asks under a bare trigger of 0) only delays the next held call, during which a signal
# would have been taken: the hold itself bounds the asks, to one per trigger interval.
HELD_STREAM_CONF = {"spark.sql.streaming.pollingDelay": "1ms"}


@contextlib.contextmanager
def stream_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set ``conf`` on ``spark`` for the duration of the block (a query started in it keeps
    them), then restore what was there."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def wait_first_trigger(query: FanoutQuery, stop: threading.Event, timeout: float) -> bool:
    """Wait until ``query`` reported its first progress (or ended); False on ``stop``/timeout.

    A progress report is written after a micro-batch completes, and after a trigger found
    nothing new (jobs/spark-defaults.conf makes the first idle report immediate).

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
    parser.add_argument("--config", help="a sharedsub TOML file on top of sharedsub/core/defaults.toml")
    parser.add_argument("--trigger-interval", type=float, help="seconds between micro-batches (0 = back to back)")
    parser.add_argument("--available-now", action="store_true", help="route what is there now, then exit 0")
    parser.add_argument(
        "--lease-epoch", type=int,
        help="write under this fan-out lease epoch, held by the caller (sharedsub serve on object storage)",
    )
    parser.add_argument(
        "--announce-routed", action="store_true",
        help=f"print {ROUTED_LINE!r} and the tables it wrote after each micro-batch that wrote rows (sharedsub serve asks)",
    )
    parser.add_argument("--checkpoint", help="Spark checkpoint dir (default: [fanout] checkpoint_dir)")
    return parser.parse_args(argv)


def _checkpoint(flag: str | None, settings: Settings) -> str | None:
    """The checkpoint location: ``--checkpoint``, else ``[fanout] checkpoint_dir``, else the
    default of sharedsub.core.layout.fanout_checkpoint_dir for a data dir on object storage; None
    for a local data dir with nothing set (build_fanout_query's defaults, per source)."""
    if flag:
        return flag
    if not settings.fanout.checkpoint_dir and local_path(settings.storage.data_dir) is not None:
        return None
    return layout.fanout_checkpoint_dir(settings.storage.data_dir, settings.fanout.checkpoint_dir, state_home())


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
        console.err(f"jobs.fanout: {exc.description}")
        return EXIT_INVALID_SETTINGS
    configure_logging(settings.log.level, settings.log.format)  # [log] / SHAREDSUB_LOG_* (serve passes its flags so)
    register(settings.storage.data_dir, settings.storage.options)  # the tables' [storage] options
    if args.lease_epoch is not None:  # started by serve, which holds the fan-out lease for it
        return _run(args, settings, None, args.lease_epoch)
    try:
        lease = own_fanout(settings.data_dir)  # object storage: one fan-out job per data dir
    except DataDirInUse as exc:
        console.err(
            f"jobs.fanout: another fan-out job ({exc.holder}) holds the fan-out lease of {settings.data_dir}: "
            "one fan-out job per data dir (stop it first)"
        )
        return EXIT_IN_USE
    except OSError as exc:  # StoreFailure: the store did not answer
        console.err(f"jobs.fanout: {exc}")
        return 1
    try:
        return _run(args, settings, lease, lease.epoch if lease is not None else None)
    finally:
        if lease is not None:
            lease.release()


def _announcer(settings: Settings, lines: bool, epoch: int | None) -> Callable[[Collection[str]], None] | None:
    """What tells the front ends which subscription tables a batch wrote: a line on stdout for
    serve's tailer (``lines``: ``--announce-routed``), and on object storage (``epoch``) the
    job's change note, which a ``sharedsub frontend`` reads (sharedsub.core.fanout.change_notes;
    its first note, stored here, makes them probe every table once: a job that died may have
    written some it never noted)."""
    note = None
    if epoch is not None and on_object_store(settings):
        first = NoteWriter(settings.data_dir, FANOUT_NOTE, NoteKeeper(epoch))
        first.flush()
        # Stored on a thread of its own: a batch does not wait for its note's PUT.
        note = NotesInBackground(first)
    if note is None and not lines:
        return None

    def announce(tables: Collection[str]) -> None:
        if lines:
            console.out(routed_line(tables))
        if note is not None:
            note.committed(tables)

    return announce


def _watch_end(query: FanoutQuery, wake: threading.Event) -> bool:
    """Set ``wake`` when ``query`` ends, from a thread blocked in its ``awaitTermination`` (a
    wait in the JVM that costs nothing, where asking ``isActive`` twice a second cost an idle
    job ~0.01 cores: issue 43). True when watching. False for the one-query-per-topic form
    (jobs.sources.delta_streaming), whose ``awaitTermination`` waits for every query, not for
    the first to fail: the caller asks ``isActive`` then. The query's error is raised by the
    caller's own ``awaitTermination``."""
    if not isinstance(query, StreamingQuery):
        return False

    def watch() -> None:
        try:
            query.awaitTermination()
        except Exception:  # noqa: BLE001 (the main thread's awaitTermination raises it)
            pass
        finally:
            wake.set()

    threading.Thread(target=watch, name="fanout-query-end", daemon=True).start()
    return True


def _run(args: argparse.Namespace, settings: Settings, lease: DataDirLock | None, epoch: int | None) -> int:
    """The fan-out query until stopped, writing under ``epoch`` (object storage), and under
    ``lease`` when this job holds it itself."""

    stop = threading.Event()

    def on_signal(signum: int, _frame: types.FrameType | None) -> None:
        log.info("%s: stopping the fan-out", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    lost: list[str] = []

    def on_lost(reason: str) -> None:
        # Fail-stop: another job may take the tables over once the lease lapses.
        log.error("the fan-out's lease is lost (%s): stopping", reason)
        lost.append(reason)
        stop.set()

    if lease is not None:
        lease.when_lost(on_lost)

    log.info("starting: data dir %s", settings.data_dir)
    spark = build_session(settings, extra_conf=DRIVER_CONF)
    # The session's master, not [fanout] spark_master: under spark-submit --master wins.
    log.info("Spark master %s, routing %s", spark.sparkContext.master, settings.fanout.routing)
    try:
        check_executors(spark, timeout=settings.fanout.startup_timeout)
    except ExecutorsUnfit as exc:
        console.err(f"jobs.fanout: {exc.description}")
        spark.stop()
        return EXIT_EXECUTORS_UNFIT
    sink = make_sink(spark, settings, on_routed=_announcer(settings, args.announce_routed, epoch), epoch=epoch)
    query: FanoutQuery | None = None
    try:
        query = build_fanout_query(
            spark,
            settings,
            checkpoint=_checkpoint(args.checkpoint, settings),
            available_now=args.available_now,
            sink=sink,
        )
        if wait_first_trigger(query, stop, settings.fanout.startup_timeout):
            console.out(READY_LINE)
        elif not stop.is_set():
            log.error("no micro-batch within %.0f s (fanout.startup_timeout)", settings.fanout.startup_timeout)
            return 1
        watched = _watch_end(query, stop)
        while not stop.is_set() and (watched or query.isActive):
            # Routed versions (asked for only around batches: sharedsub.core.fanout.progress_asks);
            # retries of failing tables between batches.
            sink.tick(query.lastProgress if sink.progress_due() else None)
            stop.wait(0.5)  # the signal handler sets ``stop``, which wakes this at once
        if query.isActive:
            query.stop()
        query.awaitTermination()  # raises the query's error, if it failed
        log.info("stopped")
        return 1 if lost else 0
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
