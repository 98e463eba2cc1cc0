"""Run the fan-out job once with available-now and write per-batch timings as JSON.

    .venv/bin/python bench/fanout_job.py --data-dir D --out STATS.json

Started by bench/fanout_bench.py in its own process (session), so Spark's JVM and Python workers
go away with it. It is ``jobs.fanout`` with ``--available-now`` (same ``build_fanout_query``,
same settings, ``max_commits_per_batch`` left at its configured value), except that the sink
records, for each ``foreachBatch`` call, the wall-clock start and end, the routed rows (source
row × matching subscription), the rows committed and the subscription-table commits. Those are
what the benchmark reports: routing time is from the first batch's start to the last batch's
end, so Spark's start-up and the query's planning before the first batch stay out.
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

from jobs.fanout import build_fanout_query  # noqa: E402
from jobs.fanout_sink import FanoutSink  # noqa: E402
from jobs.session import build_session  # noqa: E402
from sharedsub.core.config import load_settings  # noqa: E402


class TimedSink(FanoutSink):
    """FanoutSink that remembers what each batch did and how long it took."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.batches: list[dict[str, Any]] = []
        self._routed_rows = self._routes = 0

    def route(self, read: Any, batch_id: int) -> dict[str, int]:
        self._routed_rows = self._routes = 0
        start = time.time()
        written = super().route(read, batch_id)
        end = time.time()
        self.batches.append({
            "batch_id": batch_id, "start": start, "end": end, "routes": self._routes,
            "routed_rows": self._routed_rows, "rows_committed": sum(written.values()),
            "table_commits": len(written),
        })
        return written

    def write_routed(self, routed: Any, plan: Any, batch_id: int) -> dict[str, int]:
        self._routed_rows, self._routes = routed.num_rows, len(plan.routes)
        return super().write_routed(routed, plan, batch_id)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    settings = load_settings(None, os.environ, {"storage.data_dir": args.data_dir})
    t0 = time.time()
    spark = build_session(settings)
    t_session = time.time()
    sink = TimedSink(settings.data_dir)
    stats: dict[str, Any] = {"max_commits_per_batch": settings.fanout.max_commits_per_batch,
                             "spark_master": settings.fanout.spark_master}
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
            "session_s": t_session - t0, "query_start_s": t_started - t_session, "query_total_s": t_end - t_started,
            "batches": sink.batches, "progress": progress,
        })
    finally:
        sink.close()
        spark.stop()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(stats, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
