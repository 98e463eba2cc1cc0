"""Store requests of one fan-out micro-batch that commits many subscription tables on a bucket.

    .venv/bin/python bench/batch_requests.py [--tables 10,100] [--rows 10] [--batches 3] [--store-delay-ms 0]

Issue 41 asks what a batch of many tables costs on an ``s3://`` data dir. The fan-out commits
a batch's rows table by table through ``jobs.table_commits.TableCommits`` (one commit per table
that got rows, under the job's lease epoch, each table fenced at its first commit), on the
commit threads of ``jobs.parking.Parking``; this drives exactly that: for each N in
``--tables``, ``--batches`` batches of ``--rows`` rows (seqs numbered on, as a topic's) to each
of N fresh subscription tables of a bucket of a local versitygw (tests/s3_server.py), through
``Parking.write`` as ``FanoutSink.write_routed`` calls it. The server's access log
(bench/s3_access_log.py) gives the requests of each batch by client (``sharedsub``: its object
store; ``delta-rs``), verb and part (log entry, data file). The first batch makes the tables
(a delta-rs create and a fence each); the later ones are the steady state. No Spark, no serve:
the routing of a batch makes no requests (its rows come from the source's read, counted apart
by bench/idle_requests.py and bench/object_commit_cost.py). ``--store-delay-ms`` reaches the server
through a delay proxy (bench/delay_proxy.py) that hands every answer back that late: the batch's
wall time at a remote store's latency. One JSON line per (N, batch), then a
table; the command is printed first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import pyarrow as pa  # noqa: E402
import s3_access_log  # noqa: E402

from jobs.parking import Parking  # noqa: E402
from jobs.table_commits import TableCommits  # noqa: E402
from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.objects import locations  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402

EPOCH = 1  # the fan-out job's lease epoch on a bucket (every commit carries it, each table fenced)


def _rows(first: int, n: int, batch: int) -> pa.Table:
    """``n`` subscription rows from seq ``first`` (partition 0), as a batch routes them."""
    now = dt.datetime.now(dt.UTC)
    columns: dict[str, pa.Array] = {}
    for field in schemas.SUBSCRIPTION:
        if field.name == "seq":
            columns[field.name] = pa.array(range(first, first + n), field.type)
        elif field.name == "topic":
            columns[field.name] = pa.array(["bench"] * n, field.type)
        elif field.name in ("published_at", "routed_at"):
            columns[field.name] = pa.array([now] * n, field.type)
        elif field.name == "fanout_batch":
            columns[field.name] = pa.array([batch] * n, field.type)
        else:
            columns[field.name] = pa.nulls(n, field.type)
    return pa.table(columns, schema=schemas.SUBSCRIPTION)


def measure(root: str, tables: int, rows: int, batches: int, log: s3_access_log.AccessLog,
            clients: dict[str, str], delay_ms: float = 0.0) -> list[dict[str, Any]]:
    """The requests of each of ``batches`` batches into ``tables`` fresh tables under ``root``."""
    commits = TableCommits(root, epoch=EPOCH)
    parking = Parking(root)
    names = [f"subscriptions/bench-{tables}-{i}/g1" for i in range(tables)]
    out: list[dict[str, Any]] = []
    try:
        for b in range(batches):
            batch = {name: _rows(b * rows, rows, b) for name in names}
            start = log.mark()
            t0 = time.perf_counter()
            written, failed = parking.write(batch, b, commits)
            wall = time.perf_counter() - t0
            time.sleep(1.0)  # the server writes its access log lines after it answers
            requests = log.since(start)
            by = Counter((clients.get(r.user_agent, r.user_agent), r.verb, r.part) for r in requests)
            out.append({
                "tables": tables, "batch": b, "rows_per_table": rows, "store_delay_ms": delay_ms,
                "wall_s": round(wall, 2),
                "committed_tables": sum(1 for v in written.values() if v), "failed": repr(failed) if failed else None,
                "requests": len(requests), "requests_per_table": round(len(requests) / tables, 2),
                "by_client_verb_part": {" ".join(k): v for k, v in sorted(by.items())},
            })
            print(json.dumps(out[-1]), flush=True)
    finally:
        parking.close()
        commits.finish()
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure each N; print JSON lines and the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", default="10,100", help="tables per batch, comma-separated (default 10,100)")
    p.add_argument("--rows", type=int, default=10, help="rows per table per batch (default 10)")
    p.add_argument("--batches", type=int, default=3, help="batches per N; the first makes the tables (default 3)")
    p.add_argument("--store-delay-ms", type=float, default=0.0, help="ms the delay proxy in front of versitygw "
                   "adds to each answer (default 0: no proxy)")
    args = p.parse_args(argv)
    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}", flush=True)
    tmp = tempfile.mkdtemp(prefix="batch-requests-")
    server = S3Server(Path(tmp) / "buckets", Path(tmp) / "versitygw.log", Path(tmp) / "access.log",
                      delay_ms=args.store_delay_ms)
    lines: list[dict[str, Any]] = []
    try:
        server.start()
        root = server.url("data")
        locations.register(root, server.env())
        log = s3_access_log.AccessLog(str(Path(tmp) / "access.log"))
        bucket = root.rsplit("/", 1)[0]
        clients = s3_access_log.calibrate(log, bucket, server.env())
        for n in [int(x) for x in args.tables.split(",") if x.strip()]:
            print(f"{n} tables, {args.batches} batches of {args.rows} rows each", file=sys.stderr)
            lines += measure(root, n, args.rows, args.batches, log, clients, args.store_delay_ms)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| tables | batch | wall s | requests | per table | by client, verb, part |")
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for ln in lines:
        parts = ", ".join(f"{k} {v}" for k, v in ln["by_client_verb_part"].items())
        print(f"| {ln['tables']} | {ln['batch']} | {ln['wall_s']} | {ln['requests']} | {ln['requests_per_table']} | {parts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
