"""Run the fan-out job once with available-now and write per-batch timings as JSON.

    .venv/bin/python bench/fanout_job.py --data-dir D --out STATS.json [--conf K=V ...] [--warmup]

Started by bench/fanout_bench.py in its own process (session), so Spark's JVM and Python workers
go away with it. It is ``jobs.fanout`` with ``--available-now`` (same ``build_fanout_query``,
same settings, ``max_commits_per_batch`` left at its configured value), except that the sink
records, for each ``foreachBatch`` call, the wall-clock start and end, the routed rows (source
row × matching subscription), the rows committed and the subscription-table commits. Those are
what the benchmark reports: routing time is from the first batch's start to the last batch's
end, so Spark's start-up and the query's planning before the first batch stay out.

The sink is made as jobs/fanout.py ``make_sink`` makes it (``[fanout] routing``, an executor
router unless "driver"); each batch also records its source rows (``rows_in``) and the stats
where each batch was routed (``placed``). ``--conf`` adds Spark settings to the session (e.g.
``spark.executor.memory=512m`` for ``local-cluster``); ``--warmup`` runs one trivial
``mapInArrow`` job before the query starts (its seconds in ``warmup_s``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jobs.executor_routing import ExecutorRouter, executor_count, worker_setup  # noqa: E402
from jobs.fanout import build_fanout_query  # noqa: E402
from jobs.fanout_sink import FanoutSink  # noqa: E402
from jobs.session import build_session  # noqa: E402
from sharedsub.core.config import load_settings  # noqa: E402


class TimedSink(FanoutSink):
    """FanoutSink that remembers what each batch did and how long it took."""

    def __init__(self, root: str, **options: Any) -> None:
        super().__init__(root, **options)
        self.batches: list[dict[str, Any]] = []
        self._routed_rows = self._routes = 0

    def route(self, read: Any, batch_id: int) -> dict[str, int]:
        self._routed_rows = self._routes = 0
        messages = self.stats.messages
        start = time.time()
        written = super().route(read, batch_id)
        end = time.time()
        self.batches.append({
            "batch_id": batch_id, "start": start, "end": end, "routes": self._routes,
            "rows_in": self.stats.messages - messages,  # the batch's source rows: work = rows × routes
            "routed_rows": self._routed_rows, "rows_committed": sum(written.values()),
            "table_commits": len(written),
        })
        return written

    def write_routed(self, routed: Any, plan: Any, batch_id: int, **kwargs: Any) -> dict[str, int]:
        # Routed on the executors, ``routed`` is None and the rows are in the files they wrote.
        files = kwargs.get("files") or {}
        self._routes = len(plan.routes)
        self._routed_rows = routed.num_rows if routed is not None else sum(f.rows for fs in files.values() for f in fs)
        return super().write_routed(routed, plan, batch_id, **kwargs)


def _warm_worker(batches: Any) -> Any:
    """A task that imports what executor routing imports (pyarrow, deltalake, the routing code),
    so that the Python workers pay it here rather than in the first timed batch."""
    import deltalake  # noqa: F401

    import jobs.executor_routing  # noqa: F401

    yield from batches


def warm_up(spark: Any) -> float:
    """Run one trivial ``mapInArrow`` job of two tasks per core (what a routing job runs); its seconds."""
    start = time.time()
    parts = max(1, spark.sparkContext.defaultParallelism) * 2
    spark.sparkContext.setJobDescription("bench: warm up the executors' Python workers")
    spark.range(parts, numPartitions=parts).mapInArrow(_warm_worker, "id long").count()
    spark.sparkContext.setJobDescription(None)
    return time.time() - start


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--conf", action="append", default=[], help="extra Spark setting K=V (repeatable)")
    p.add_argument("--warmup", action="store_true", help="run a warm-up mapInArrow job before the query starts")
    args = p.parse_args()
    extra = dict(c.split("=", 1) for c in args.conf)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = load_settings(None, os.environ, {"storage.data_dir": args.data_dir})
    t0 = time.time()
    spark = build_session(settings, extra_conf=extra)
    t_session = time.time()
    warmup_s = warm_up(spark) if args.warmup else None
    t_warm = time.time()
    fanout = settings.fanout
    router = None  # as jobs.fanout.make_sink makes the job's sink
    if fanout.routing != "driver":
        router = ExecutorRouter(spark, worker_setup(settings.data_dir, settings.storage.options, os.environ))
    sink = TimedSink(settings.data_dir, retry_interval=fanout.table_retry_interval, routing=fanout.routing,
                     executor_min_work=fanout.executor_min_work, router=router)
    stats: dict[str, Any] = {"max_commits_per_batch": settings.fanout.max_commits_per_batch,
                             "spark_master": settings.fanout.spark_master, "routing": settings.fanout.routing,
                             "executor_min_work": settings.fanout.executor_min_work, "warmup_s": warmup_s,
                             "executors": executor_count(spark)}
    try:
        query = build_fanout_query(spark, settings, available_now=True, sink=sink)
        t_started = time.time()
        query.awaitTermination()
        t_end = time.time()
        progress = [
            {"batchId": pr["batchId"], "timestamp": pr["timestamp"], "numInputRows": pr["numInputRows"],
             "durationMs": pr.get("durationMs", {})}
            for pr in (json.loads(p.json) for p in query.recentProgress)
        ]
        stats.update({
            "session_s": t_session - t0, "query_start_s": t_started - t_warm, "query_total_s": t_end - t_started,
            "batches": sink.batches, "progress": progress,
            "placed": {p.value: n for p, n in sink.placed.items()},
        })
    finally:
        sink.close()
        spark.stop()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(stats, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
