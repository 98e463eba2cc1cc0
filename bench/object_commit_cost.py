"""Per-table commit rate and commit latency of sharedsub's append path on a local data dir and on
a local S3 server (versitygw), and what a real S3 would make of them, by calculation.

    .venv/bin/python bench/object_commit_cost.py [--tables 1,4] [--seconds 20] [--warmup 3]
                                                 [--rows 20] [--stores local,s3] [--put-ms 10,30]
                                                 [--store-delay-ms 0]

For each store and each N in ``--tables``: N fresh topic tables (``sharedsub.storage.topics.
create_topic``), one thread per table appending ``--rows`` 1 KB messages per commit, back to
back, through ``DeltaAppender`` made as the service makes it (``sharedsub.storage.commits.
commit_store.DeltaStore``: on a local dir with fsync and its blind-append fast path; on a bucket
with the owner epoch, i.e. delta-rs's conditional put of the next log entry). N threads on N
tables is how the fan-out commits a micro-batch's subscription tables (jobs/fanout_sink.py, a
pool of commit threads); the front end's committer commits its topics one after another, so one
table is its case. After ``--warmup`` s the commits of ``--seconds`` s are timed: per table
commits/s, p50 and p99 ms, and commits/s over all tables.

On S3 the server's access log (bench/s3_access_log.py) counts, over the same window, the
requests by client, verb and part (log entry, data file) and the server's mean ms for each:
requests per commit. An append waits for each of its requests in turn (the appender is
synchronous and delta-rs makes them one after another: load or update the log, put the data
file, put the log entry if absent), so on a store where each takes ``r`` ms longer than on this
loopback server, a commit takes about ``requests per commit × r`` ms longer (measured rather than
calculated with ``--store-delay-ms r``: the S3 server is then reached through a delay proxy,
bench/delay_proxy.py, that hands every answer back ``r`` ms late). The script prints
that calculation for ``--put-ms`` (the 10–30 ms per PUT of real S3; reads taken at the same
cost, an upper bound: S3's GET and LIST of small objects are usually faster), and what it makes
of the front end's publish→accepted: a message waits for the group commit in progress (on
average half of one) and then its own, so mean ≈ 1.5 and worst ≈ 2 commit latencies, times
the number of topics written in the same group (the committer commits them in turn).

Everything runs in this process (no serve, no Spark); the S3 server is started and stopped by
the script, on 127.0.0.1, over a temp directory on the same disk as the local tables. versitygw
does not fsync what it stores; the local appenders do, every commit (as ``[storage] fsync``,
the default, makes the service do): the loopback S3 figures are spared that cost. Prints one JSON line per (store, N) and the
tables; the command line is printed first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import procstat  # noqa: E402
import pyarrow as pa  # noqa: E402
import s3_access_log  # noqa: E402

from sharedsub.storage import schemas  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402
from sharedsub.storage.objects import locations  # noqa: E402
from sharedsub.storage.topics import create_topic  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402

EPOCH = 1  # a bucket's appenders write under the owner lease's epoch, as the service's do


def _batch(first: int, rows: int) -> pa.Table:
    now = dt.datetime.now(dt.UTC)
    return pa.Table.from_pylist(
        [{"seq": s, "published_at": now, "size": 1024, "message": os.urandom(1024)} for s in range(first, first + rows)],
        schema=schemas.TOPIC,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(root: str, n: int, *, on_s3: bool, rows: int, warmup_s: float, seconds: float,
            log: s3_access_log.AccessLog | None) -> dict[str, Any]:
    """N threads, each appending to its own fresh topic table under ``root``; returns the figures
    of the timed window (and the access log's requests over it when ``log`` is given)."""
    tag = f"n{n}-{os.urandom(3).hex()}"
    paths = [create_topic(root, f"cost-{tag}-{i}") for i in range(n)]
    appenders = [
        DeltaAppender(p, schemas.TOPIC, epoch=EPOCH) if on_s3 else DeltaAppender(p, schemas.TOPIC, fsync=True)
        for p in paths
    ]
    batch = _batch(0, rows)  # the same rows each commit: the cost is the commit's, not the encoding's
    timed: list[list[float]] = [[] for _ in range(n)]
    errors: list[str] = []
    start = threading.Barrier(n + 1)
    window: dict[str, float] = {}
    marks: dict[str, int] = {}

    def worker(i: int) -> None:
        start.wait()
        try:
            while True:
                t0 = time.perf_counter()
                appenders[i].append(batch)
                t1 = time.perf_counter()
                if t0 >= window.get("end", float("inf")):
                    return
                if t0 >= window.get("start", float("inf")):
                    timed[i].append(t1 - t0)
        except Exception as exc:  # noqa: BLE001 - reported in the line, the other tables go on
            errors.append(f"{paths[i]}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(warmup_s)
    marks["start"] = log.mark() if log else 0
    window["start"] = time.perf_counter()
    time.sleep(seconds)
    window["end"] = time.perf_counter()
    marks["end"] = log.mark() if log else 0
    for t in threads:
        t.join(300)
    span = window["end"] - window["start"]
    commits = sum(len(t) for t in timed)
    per_table = [
        {"commits_per_s": round(len(t) / span, 1), "p50_ms": round(1000 * _pct(t, 0.5), 1),
         "p99_ms": round(1000 * _pct(t, 0.99), 1)} if t else {"commits_per_s": 0.0}
        for t in timed
    ]
    all_latencies = [x for t in timed for x in t]
    line: dict[str, Any] = {
        "store": "s3" if on_s3 else "local", "tables": n, "rows_per_commit": rows, "window_s": round(span, 2),
        "loadavg_1m_after": procstat.loadavg_1m(),
        "commits": commits, "commits_per_s_all_tables": round(commits / span, 1),
        "commits_per_s_per_table": round(statistics.median(p["commits_per_s"] for p in per_table), 1),
        "p50_ms": round(1000 * _pct(all_latencies, 0.5), 1) if all_latencies else None,
        "p99_ms": round(1000 * _pct(all_latencies, 0.99), 1) if all_latencies else None,
        "per_table": per_table, "errors": errors[:5],
    }
    if log is not None and commits:
        line.update(_requests(log.since(marks["start"], marks["end"]), commits))
    return line


def _requests(requests: list[s3_access_log.Request], commits: int) -> dict[str, Any]:
    """Requests per commit by (verb, part), and the server's mean ms per verb, in the window.
    Commits in flight at its edges make the per-commit figures approximate by a few parts in
    ``commits``."""
    by: Counter[str] = Counter(f"{r.verb} {r.part}" for r in requests)
    ms: dict[str, list[int]] = {}
    for r in requests:
        ms.setdefault(r.verb, []).append(r.total_ms)
    return {
        "requests": len(requests),
        "requests_per_commit": round(len(requests) / commits, 2),
        "requests_per_commit_by_kind": {k: round(v / commits, 2) for k, v in sorted(by.items())},
        "server_mean_ms_by_verb": {v: round(statistics.fmean(x), 2) for v, x in sorted(ms.items())},
        "failed_requests": sum(1 for r in requests if r.status >= 400),
    }


def what_real_s3_does(line: dict[str, Any], put_ms: list[float]) -> list[str]:
    """The calculation: one table's commit on a store where every request takes ``r`` ms more
    than on the loopback server, for each ``r`` in ``put_ms``."""
    per_commit = line["requests_per_commit"]
    base = line["p50_ms"]
    out = [f"a commit here: p50 {base} ms, {per_commit} requests ({line['requests_per_commit_by_kind']}), "
           "made one after another"]
    for r in put_ms:
        c = base + per_commit * r
        out.append(
            f"at +{r:g} ms per request: commit ≈ {base} + {per_commit} × {r:g} = {c:.0f} ms → "
            f"≈ {1000 / c:.0f} commits/s per table; publish→accepted (one topic in the group) "
            f"mean ≈ 1.5 × {c:.0f} = {1.5 * c:.0f} ms, worst ≈ 2 × {c:.0f} = {2 * c:.0f} ms; with k topics "
            f"in one group, k times that"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure each (store, N); print JSON lines, the table and the calculation."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", default="1,4", help="concurrent tables, comma-separated (default 1,4)")
    p.add_argument("--seconds", type=float, default=20.0, help="timed window per (store, N), s (default 20)")
    p.add_argument("--warmup", type=float, default=3.0, help="untimed commits first, s (default 3)")
    p.add_argument("--rows", type=int, default=20, help="1 KB messages per commit (default 20)")
    p.add_argument("--stores", default="local,s3", help="local, s3 or both (default local,s3)")
    p.add_argument("--put-ms", default="10,30", help="per-request costs of a real S3 to calculate with, ms")
    p.add_argument("--store-delay-ms", type=float, default=0.0, help="s3: ms the delay proxy in front of versitygw "
                   "adds to each answer (default 0: no proxy)")
    p.add_argument("--keep", action="store_true", help="keep the temp directories (paths go to stderr)")
    args = p.parse_args(argv)
    print(f"$ {shlex.join([os.path.relpath(sys.executable), *sys.argv])}", flush=True)
    counts = [int(x) for x in args.tables.split(",") if x.strip()]
    stores = [x.strip() for x in args.stores.split(",") if x.strip()]
    put_ms = [float(x) for x in args.put_ms.split(",") if x.strip()]
    tmp = tempfile.mkdtemp(prefix="object-commit-cost-")
    server: S3Server | None = None
    lines: list[dict[str, Any]] = []
    try:
        for store in stores:
            log = None
            if store == "s3":
                server = S3Server(Path(tmp) / "buckets", Path(tmp) / "versitygw.log", Path(tmp) / "access.log",
                                  delay_ms=args.store_delay_ms)
                server.start()
                root = server.url("data")
                locations.register(root, server.env())
                log = s3_access_log.AccessLog(str(Path(tmp) / "access.log"))
            else:
                root = str(Path(tmp) / "local")
            for n in counts:
                print(f"[{store}] {n} table(s): {args.warmup:g} s warm-up, {args.seconds:g} s timed", file=sys.stderr)
                line = measure(root, n, on_s3=store == "s3", rows=args.rows, warmup_s=args.warmup,
                               seconds=args.seconds, log=log)
                if store == "s3":
                    line["store_delay_ms"] = args.store_delay_ms
                lines.append(line)
                print(json.dumps(line), flush=True)
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("\n| store | tables | commits/s per table | commits/s all tables | p50 ms | p99 ms | requests per commit |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for ln in lines:
        print(f"| {ln['store']} | {ln['tables']} | {ln['commits_per_s_per_table']} | {ln['commits_per_s_all_tables']} "
              f"| {ln['p50_ms']} | {ln['p99_ms']} | {ln.get('requests_per_commit', '–')} |")
    one = next((ln for ln in lines if ln["store"] == "s3" and ln["tables"] == 1 and ln.get("requests_per_commit")), None)
    if one is not None:
        print("\nWhat a real S3 makes of one table's commits (calculation, see the docstring):")
        if args.store_delay_ms:
            print(f"(the commits above already paid the proxy's {args.store_delay_ms:g} ms per request: "
                  "the figures below add to that)")
        for text in what_real_s3_does(one, put_ms):
            print(f"- {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
