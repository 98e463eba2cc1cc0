"""Requests per second an idle ``sharedsub serve`` on a bucket makes, counted at the S3 server:
per idle topic and per idle subscription with a consumer attached, the fan-out job's and
delta-rs's requests included.

    .venv/bin/python bench/idle_requests.py [--configs 0x0,1x0,1x1,4x4] [--window 60] [--settle 20]
                                            [--store-delay-ms 0]

Starts a versitygw with its access log (tests/s3_server.py, bench/s3_access_log.py) and one real
``sharedsub serve`` (with its embedded fan-out job) on a bucket of it
(bench/sharedsub_service.py ``SharedSubS3Service``; with ``--store-delay-ms`` reached through a
delay proxy, bench/delay_proxy.py, that hands every answer back that late). Then, for each configuration ``TxS`` in
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
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import procstat  # noqa: E402
import s3_access_log  # noqa: E402
import stages  # noqa: E402
from sharedsub_service import SharedSubS3Service  # noqa: E402

from tests.amqp_peer import Subscriber, jms_shared_durable  # noqa: E402
from tests.prometheus_text import parse as parse_metrics  # noqa: E402

METRIC = "sharedsub_object_store_requests_total"


def log(text: str) -> None:
    print(f"[idle {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def parse_configs(text: str) -> list[tuple[int, int]]:
    """``"0x0,1x1,4x4"`` → [(0, 0), (1, 1), (4, 4)]; T and S must not decrease, S ≤ T."""
    out = []
    for item in text.split(","):
        t, _, s = item.strip().partition("x")
        out.append((int(t), int(s)))
    for (t0, s0), (t1, s1) in zip(out, out[1:], strict=False):
        if t1 < t0 or s1 < s0:
            raise SystemExit(f"--configs: each configuration adds to the one before ({t0}x{s0} then {t1}x{s1})")
    if any(s > t for t, s in out):
        raise SystemExit("--configs: one subscription per topic at most (S ≤ T)")
    return out


def front_end_counts(url: str) -> dict[tuple[str, str], float]:
    """The front end's ``sharedsub_object_store_requests_total`` by (kind, family) now."""
    with urllib.request.urlopen(url, timeout=30) as reply:
        samples = parse_metrics(reply.read().decode())[1]
    return {
        (dict(labels)["kind"], dict(labels)["family"]): value
        for (name, labels), value in samples.items()
        if name == METRIC
    }


def window(svc: SharedSubS3Service, access: s3_access_log.AccessLog, clients: dict[str, str],
           seconds: float) -> dict[str, Any]:
    """Requests per second over one window: at the server by (client, verb, family), and on the
    front end's /metrics by (kind, family)."""
    url = stages.metrics_url(svc.data_dir)
    pid = svc.broker_pid()
    assert pid is not None and svc.server.proc is not None
    load = procstat.loadavg_1m()
    before = front_end_counts(url)
    cpu0, s3_cpu0 = procstat.tree_cpu_seconds(pid), procstat.process_cpu_seconds(svc.server.proc.pid) or 0.0
    t0, start = time.monotonic(), access.mark()
    time.sleep(seconds)
    end, t1 = access.mark(), time.monotonic()
    cpu1, s3_cpu1 = procstat.tree_cpu_seconds(pid), procstat.process_cpu_seconds(svc.server.proc.pid) or 0.0
    after = front_end_counts(url)
    scraped = access.mark()
    span = t1 - t0
    at_server = s3_access_log.counts(access.since(start, end), clients)
    # A scrape is not idle: /metrics' backlog figures read the subscription tables. What the
    # closing scrape cost (plus whatever else ran in its few ms) is left out of the window and
    # shown apart; the front end's own count over the window includes it.
    scrape = s3_access_log.counts(access.since(end, scraped), clients)
    return {
        "window_s": round(span, 2),
        "loadavg_1m_before": load,
        # Cores kept busy while idle: serve with its fan-out JVM and workers; the S3 server.
        "serve_cpu_cores": round((cpu1 - cpu0) / span, 3),
        "s3_server_cpu_cores": round((s3_cpu1 - s3_cpu0) / span, 3),
        "one_metrics_scrape_requests": {" ".join(k): v for k, v in sorted(scrape.items())},
        "server_per_s": {" ".join(k): round(v / span, 3) for k, v in sorted(at_server.items())},
        "server_total_per_s": round(sum(at_server.values()) / span, 3),
        "front_end_metrics_per_s": {
            " ".join(k): round((after.get(k, 0.0) - before.get(k, 0.0)) / span, 3) for k in sorted(after)
            if after.get(k, 0.0) != before.get(k, 0.0)
        },
        "front_end_metrics_total_per_s": round((sum(after.values()) - sum(before.values())) / span, 3),
    }


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
    out = tempfile.mkdtemp(prefix="idle-requests-")
    access = s3_access_log.AccessLog(os.path.join(out, "access.log"))
    svc = SharedSubS3Service(log=log, log_path=os.path.join(out, "serve.log"),
                             server_log_path=os.path.join(out, "versitygw.log"), access_log=access.path,
                             keep_data=args.keep, store_delay_ms=args.store_delay_ms)
    subscribers: list[Subscriber] = []
    rows: list[dict[str, Any]] = []
    with svc:
        clients = s3_access_log.calibrate(access, f"s3://{svc.bucket}", svc.server.env())
        log(f"clients by user agent: {clients}")
        log(f"starting serve on {svc.data_dir}")
        start_s = svc.start()
        log(f"serve ready in {start_s:.1f} s at {svc.url}")
        topics: list[str] = []
        try:
            for t, s in configs:
                new = [f"idle-{i}" for i in range(len(topics), t)]
                if new:
                    svc.create_topics(new)
                    topics += new
                while len(subscribers) < s:
                    j = len(subscribers)
                    sub = Subscriber(svc.url, topics[j], container_id=f"idle-app-{j}", **jms_shared_durable(f"idle-sub-{j}"))
                    sub.start()
                    subscribers.append(sub)
                    if not sub.attached.wait(60):
                        raise RuntimeError(f"subscription idle-sub-{j} on {topics[j]} did not attach in 60 s: {sub.error}")
                log(f"T={t} S={s}: settling {args.settle:g} s, then counting {args.window:g} s")
                time.sleep(args.settle)
                row = {"topics": t, "subscriptions": s, "store_delay_ms": args.store_delay_ms,
                       **window(svc, access, clients, args.window)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            for sub in subscribers:
                sub.stop()
            svc.stop()
    if args.keep:
        log(f"logs kept in {out}")
    else:
        shutil.rmtree(out, ignore_errors=True)
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
