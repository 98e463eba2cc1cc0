"""Requests per second an idle ``sharedsub serve`` on a bucket makes, counted at the S3 server:
per idle topic and per idle subscription with a consumer attached, the fan-out job's and
delta-rs's requests included.

    .venv/bin/python bench/idle_requests.py [--configs 0x0,1x0,1x1,4x4] [--window 60] [--settle 20]
                                            [--store-delay-ms 0]

Through bench/served_bucket.py (shared with bench/requests_bill.py): starts a versitygw with
its access log (tests/s3_server.py, bench/s3_access_log.py) and one real ``sharedsub serve``
(with its embedded fan-out job) on a bucket of it (bench/sharedsub_service.py
``SharedSubS3Service``; with ``--store-delay-ms`` reached through a delay proxy,
bench/delay_proxy.py, that hands every answer back that late). Then, for each configuration ``TxS`` in
``--configs`` in turn (each adds to the one before: T and S never decrease), it creates topics
up to T and attaches subscriptions up to S, subscription j a JMS shared durable subscription on
topic j with one consumer (tests/amqp_peer.py ``Subscriber``, credit 100) that stays attached;
nothing is published. After ``--settle`` s (the attaches' backlog loads, the fan-out's first
batches, its ``unsubscribed_topic_interval``) it counts, over ``--window`` s, the requests in
the access log by client (``sharedsub``: the service's object store, obstore, in the front end
and in the fan-out job; ``delta-rs``: table loads and commits, in every process), verb
(GET/HEAD/PUT/LIST/DELETE) and table family, and the front end's own
``sharedsub_object_store_requests_total`` on ``/metrics`` over the same window (its scrapes
bracket the access-log window). Nothing else touches the bucket during a window. A scrape of
``/metrics`` makes requests of its own (its backlog figures read the subscription tables): they
are counted apart (``one_metrics_scrape_requests``: the closing scrape), outside the window,
while the front end's count over the window includes them.

Printed: one JSON line per configuration (with serve's and the S3 server's CPU over the
window), a table of requests/s by (client, verb, family) per configuration, and requests/s =
base + per_topic × T + per_subscription × S fitted by least squares over the configurations
(exact with three of them; four or more also show how linear it is: the residuals). The
probes are paced by timers, so a loaded machine makes fewer of them than a quiet one. The
command is printed first.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from served_bucket import ServedBucket, parse_configs  # noqa: E402


def log(text: str) -> None:
    print(f"[idle {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def fit(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """requests/s = base + per_topic × T + per_subscription × S over the configurations (least
    squares); None with fewer than three configurations or when they do not separate T and S."""
    if len(rows) < 3:
        return None
    a = np.array([[1.0, r["topics"], r["subscriptions"]] for r in rows])
    y = np.array([r["server_total_per_s"] for r in rows])
    if np.linalg.matrix_rank(a) < 3:
        return None
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return {
        "base_per_s": round(float(coef[0]), 3),
        "per_idle_topic_per_s": round(float(coef[1]), 3),
        "per_idle_subscription_per_s": round(float(coef[2]), 3),
        "residuals_per_s": [round(float(x), 3) for x in y - a @ coef],
    }


def table(rows: list[dict[str, Any]]) -> str:
    """Requests/s by (client, verb, family), one column per configuration, then the totals and
    the front end's own count."""
    keys = sorted({k for r in rows for k in r["server_per_s"]})
    head = "| client verb family | " + " | ".join(f"T={r['topics']} S={r['subscriptions']}" for r in rows) + " |"
    out = [head, "| --- |" + " ---: |" * len(rows)]
    for k in keys:
        out.append(f"| {k} | " + " | ".join(f"{r['server_per_s'].get(k, 0.0):.2f}" for r in rows) + " |")
    out.append("| **all, at the server** | " + " | ".join(f"**{r['server_total_per_s']:.2f}**" for r in rows) + " |")
    out.append("| front end's own (/metrics) | "
               + " | ".join(f"{r['front_end_metrics_total_per_s']:.2f}" for r in rows) + " |")
    out.append("| serve's CPU (cores) | " + " | ".join(f"{r['serve_cpu_cores']:.2f}" for r in rows) + " |")
    out.append("| one /metrics scrape (requests, not per s) | "
               + " | ".join(str(sum(r["one_metrics_scrape_requests"].values())) for r in rows) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the configurations on one service; print JSON lines, the table and the fit."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="0x0,1x0,1x1,4x4", help="TxS: topics x subscriptions with a consumer, "
                   "comma-separated, non-decreasing (default 0x0,1x0,1x1,4x4)")
    p.add_argument("--window", type=float, default=60.0, help="counted seconds per configuration (default 60)")
    p.add_argument("--settle", type=float, default=20.0, help="seconds after a change before counting (default 20)")
    p.add_argument("--store-delay-ms", type=float, default=0.0, help="ms the delay proxy in front of versitygw "
                   "adds to each answer (default 0: no proxy)")
    p.add_argument("--keep", action="store_true", help="keep the bucket, the logs and the host state dir")
    args = p.parse_args(argv)
    configs = parse_configs(args.configs)
    print(f"$ {shlex.join([os.path.relpath(sys.executable, ROOT), *sys.argv])}", flush=True)
    rows: list[dict[str, Any]] = []
    with ServedBucket(name="idle", tmp_prefix="idle-requests-", log=log, keep=args.keep,
                      store_delay_ms=args.store_delay_ms) as bucket:
        for t, s in configs:
            bucket.grow(t, s)
            log(f"T={t} S={s}: settling {args.settle:g} s, then counting {args.window:g} s")
            time.sleep(args.settle)
            row = {"topics": t, "subscriptions": s, "store_delay_ms": args.store_delay_ms,
                   **bucket.window(args.window).row}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\nRequests per second at the S3 server, idle (nothing published):\n")
    print(table(rows))
    model = fit(rows)
    if model is not None:
        print(f"\nFitted over {len(rows)} configurations: {model['base_per_s']} + {model['per_idle_topic_per_s']} × T + "
              f"{model['per_idle_subscription_per_s']} × S requests/s (residuals {model['residuals_per_s']})")
        print(json.dumps({"fit": model}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
