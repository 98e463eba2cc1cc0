"""The bill of a ``sharedsub serve`` on a bucket while messages flow: requests per second and per
1,000 messages, counted at the S3 server, and what they cost at AWS S3 list prices (issue 42).

    .venv/bin/python bench/requests_bill.py [--configs 1x1,100x100] [--rates 10,100,1000]
                                            [--settle 15] [--window 60] [--drain 120]
                                            [--store-delay-ms 0]

One service through bench/served_bucket.py (shared with bench/idle_requests.py): a versitygw
with its access log and a real ``sharedsub serve`` with its embedded fan-out job on a bucket of
it (with ``--store-delay-ms`` reached through the delay proxy, bench/delay_proxy.py). For each
configuration ``TxS`` in ``--configs`` in turn (each adds to the one before), it makes T topics
and S subscriptions, subscription j a JMS shared durable subscription on topic j mod T with one
consumer (tests/amqp_peer.py ``Subscriber``, credit 100 topped up per message) that accepts
everything, counts each delivery by its ``bench_seq`` and keeps no body. Then, per configuration:

* the idle row (rate 0): nothing published; ``--settle`` s, then a ``--window`` s count;
* for each rate R of ``--rates`` (msg/s in total): a paced publisher (bench/workloads.py
  ``publish_at_rate``, one connection, a sender link per topic) sends 1 KB durable messages
  round-robin over the T topics (R / T msg/s each); after ``--settle`` s of traffic the window
  is counted while it keeps sending; then it stops, and every message it got accepted must reach
  each subscription of its topic within ``--drain`` s. Missing or duplicated deliveries, or a
  message the service did not accept, mark the run as failed (and the exit status 1).

The publisher is an AMQP client, not a store client: its cost is not in the count. Every request
in the window is serve's: by verb (GET, HEAD, PUT, LIST, DELETE), family (topics, subscriptions,
catalog, cluster, fanout, other) and client (``sharedsub``: obstore; ``delta-rs``), the
requests per 1,000 messages sent in the window, and the price: PUT, COPY, POST and LIST
$0.005 per 1,000, GET, HEAD and others $0.0004 per 1,000, DELETE free (S3 Standard list
prices), per month = per second × 2,592,000 (30 days). Also the busiest prefix, a table's
directory (``data/topics/<t>/``: S3 partitions its request rate by key prefix), against S3's
per-prefix limits: 3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests/s (a LIST is a GET
on the bucket and is counted with them, under the prefix it lists).

Printed: the command, one JSON line per (configuration, rate), a markdown table for
bench/RESULTS.md and a line naming the per-prefix limits with the busiest prefix seen. The
probes are paced by timers, so a loaded machine makes fewer of them than a quiet one.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import s3_access_log  # noqa: E402
import workloads  # noqa: E402
from served_bucket import ServedBucket, parse_configs  # noqa: E402

from tests.amqp_peer import Received, Subscriber  # noqa: E402

SECONDS_PER_MONTH = 2_592_000  # 30 days

# S3 Standard list prices, $ per 1,000 requests: PUT, COPY, POST, LIST; GET, HEAD and all
# others; DELETE (and a multipart upload's abort) free. Verbs as bench/s3_access_log.py names them.
PRICE_PER_1000 = {"put": 0.005, "get": 0.0004, "free": 0.0}
_PUT_PRICED = frozenset({
    "PUT", "LIST", "CopyObject", "PostObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
    "CompleteMultipartUpload", "ListBuckets", "ListMultipartUploads", "ListParts", "ListObjectVersions",
})
_FREE = frozenset({"DELETE", "AbortMultipartUpload"})

# S3's request rates per prefix: PUT/COPY/POST/DELETE, and GET/HEAD (with LIST, a GET).
PREFIX_LIMITS = {"write": 3500, "read": 5500}
_WRITES = frozenset({
    "PUT", "DELETE", "CopyObject", "PostObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
    "CompleteMultipartUpload", "AbortMultipartUpload",
})
_LIMIT_NAMES = {"write": "PUT/COPY/POST/DELETE", "read": "GET/HEAD"}


def log(text: str) -> None:
    print(f"[bill {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- pure: price, prefixes, table


def price_class(verb: str) -> str:
    """``put`` ($0.005 per 1,000), ``get`` ($0.0004 per 1,000) or ``free``."""
    if verb in _FREE:
        return "free"
    return "put" if verb in _PUT_PRICED else "get"


def usd_per_month(per_s_by_verb: Mapping[str, float]) -> float:
    """The monthly price (30 days) of requests at these rates per verb, at S3 list prices."""
    per_s = sum(rate * PRICE_PER_1000[price_class(verb)] / 1000 for verb, rate in per_s_by_verb.items())
    return per_s * SECONDS_PER_MONTH


def table_dir(key: str) -> str:
    """The table directory a key (or a LIST's prefix) is under: the part before ``_delta_log``,
    else the key's directory without Hive partition directories (``name=value``)."""
    parts = key.split("/")
    if "_delta_log" in parts:
        return "/".join(parts[: parts.index("_delta_log")]) + "/"
    head = parts[:-1]
    while head and "=" in head[-1]:
        head.pop()
    return "/".join(head) + "/" if head else ""


def busiest_prefixes(requests: Iterable[s3_access_log.Request], seconds: float) -> dict[str, dict[str, Any]]:
    """Per limit class (``write``: PUT/COPY/POST/DELETE, ``read``: the rest), the table directory
    with the most requests and its rate per second over ``seconds``; a class with none is left out."""
    counts: dict[str, collections.Counter[str]] = {"write": collections.Counter(), "read": collections.Counter()}
    for r in requests:
        counts["write" if r.verb in _WRITES else "read"][table_dir(r.key)] += 1
    out: dict[str, dict[str, Any]] = {}
    for cls, c in counts.items():
        if c:
            prefix, n = max(c.items(), key=lambda kv: (kv[1], kv[0]))
            out[cls] = {"prefix": prefix, "per_s": round(n / seconds, 3), "limit_per_s": PREFIX_LIMITS[cls]}
    return out


def bill(requests: Sequence[s3_access_log.Request], clients: Mapping[str, str], seconds: float,
         messages: int) -> dict[str, Any]:
    """Requests per second by verb, family and client, per 1,000 of ``messages`` (None when
    none), their monthly price, and the busiest prefixes, over a window of ``seconds``."""
    by_verb = collections.Counter(r.verb for r in requests)
    per_s = {verb: n / seconds for verb, n in by_verb.items()}
    return {
        "requests": len(requests),
        "requests_per_s": round(len(requests) / seconds, 3),
        "by_verb_per_s": {k: round(v, 3) for k, v in sorted(per_s.items())},
        "by_family_per_s": {k: round(v / seconds, 3)
                            for k, v in sorted(collections.Counter(r.family for r in requests).items())},
        "by_client_per_s": {k: round(v / seconds, 3) for k, v in sorted(
            collections.Counter(clients.get(r.user_agent, r.user_agent) for r in requests).items())},
        "requests_per_1000_messages": round(len(requests) * 1000 / messages, 2) if messages else None,
        "usd_per_month": round(usd_per_month(per_s), 2),
        "busiest_prefix": busiest_prefixes(requests, seconds),
    }


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The markdown table of the rows: one per (configuration, rate)."""
    out = ["| config | rate (msg/s) | req/s | PUT/s | GET+HEAD/s | LIST/s | req per 1,000 msgs | $/month | deliveries ok |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        verbs = r["by_verb_per_s"]
        per_1000 = r["requests_per_1000_messages"]
        ok = "–" if not r["rate"] else ("yes" if not r["failed"] else f"**no** ({_failure(r)})")
        rate = "idle" if not r["rate"] else f"{r['rate']:g}"
        out.append(
            f"| {r['topics']}x{r['subscriptions']} | {rate} "
            f"| {r['requests_per_s']:.2f} | {verbs.get('PUT', 0.0):.2f} "
            f"| {verbs.get('GET', 0.0) + verbs.get('HEAD', 0.0):.2f} | {verbs.get('LIST', 0.0):.2f} "
            f"| {'–' if per_1000 is None else format(per_1000, ',.1f')} | {r['usd_per_month']:,.2f} | {ok} |"
        )
    return "\n".join(out)


def _failure(row: Mapping[str, Any]) -> str:
    d = row["deliveries"]
    return (f"{d['missing']} missing, {d['duplicates']} duplicated, {d['not_accepted']} not accepted, "
            f"{d['publisher_errors']} publisher errors")


def limits_line(rows: Sequence[Mapping[str, Any]]) -> str:
    """S3's per-prefix limits and, per class, the busiest prefix over all rows (with its row)."""
    seen = []
    for cls in ("write", "read"):
        found = [(r["busiest_prefix"][cls], r) for r in rows if cls in r["busiest_prefix"]]
        if found:
            top, r = max(found, key=lambda x: x[0]["per_s"])
            rate = "idle" if not r["rate"] else f"{r['rate']:g} msg/s"
            seen.append(f"{top['per_s']:,.2f} {_LIMIT_NAMES[cls]}/s on `{top['prefix']}` "
                        f"({r['topics']}x{r['subscriptions']}, {rate})")
    return (f"S3 serves {PREFIX_LIMITS['write']:,} PUT/COPY/POST/DELETE and {PREFIX_LIMITS['read']:,} GET/HEAD "
            f"requests/s per prefix (LIST counted with GET/HEAD); the busiest prefix (a table's directory) seen: "
            + ("; ".join(seen) if seen else "none") + ".")


def delivery_check(expected: Mapping[int, Iterable[int]], got: Mapping[int, Mapping[int, int]]) -> dict[str, int]:
    """Deliveries against what each subscription j should have (``expected[j]``: bench_seqs):
    ``got[j]`` counts deliveries by bench_seq. A seq delivered n > 1 times is n - 1 duplicates;
    an unexpected one is a seq its topic never got."""
    missing = duplicates = unexpected = want = 0
    for j, seqs in expected.items():
        have = got.get(j, {})
        wanted = set(seqs)
        want += len(wanted)
        missing += sum(1 for s in wanted if s not in have)
        unexpected += sum(1 for s in have if s not in wanted)
    for counts in got.values():
        duplicates += sum(n - 1 for n in counts.values() if n > 1)
    unexpected += sum(len(c) for j, c in got.items() if j not in expected)
    return {"expected": want, "delivered": sum(sum(c.values()) for c in got.values()), "missing": missing,
            "duplicates": duplicates, "unexpected": unexpected}


# --------------------------------------------------------------------------- the consumers' count


class Deliveries:
    """What each subscription's consumer got, by run and bench_seq. The consumers accept
    everything; a delivery is counted, then dropped from ``Subscriber.received`` on the
    consumer's own thread (the only one that appends to it), so a run holds no bodies."""

    def __init__(self) -> None:
        self.got: dict[tuple[str, int], collections.Counter[int]] = {}
        self.unstamped = 0
        self.subscribers: list[Subscriber] = []

    def settle(self, j: int) -> Callable[[Received], str]:
        """The ``Subscriber`` settlement of subscription j: count, forget the body, accept."""
        def accept(got: Received) -> str:
            props = got.message.properties or {}
            run, seq = props.get("bench_run"), props.get("bench_seq")
            if run is None or seq is None:
                self.unstamped += 1
            else:
                self.got.setdefault((str(run), j), collections.Counter())[int(seq)] += 1
            if j < len(self.subscribers):
                self.subscribers[j].received.clear()
            return "accept"

        return accept

    def of_run(self, run: str) -> dict[int, collections.Counter[int]]:
        """Subscription j's deliveries of ``run`` by bench_seq."""
        return {j: c for (r, j), c in list(self.got.items()) if r == run}

    def forget(self, run: str) -> None:
        for key in [k for k in list(self.got) if k[0] == run]:
            del self.got[key]


# --------------------------------------------------------------------------- runs


def expected_deliveries(subscription_topic: Sequence[int], topics: int, sent: int,
                        not_accepted: Iterable[int]) -> dict[int, set[int]]:
    """Subscription j's bench_seqs: those sent to its topic (seq mod T), less the refused ones."""
    refused = set(not_accepted)
    return {j: set(range(t, sent, topics)) - refused for j, t in enumerate(subscription_topic)}


def publishing_run(bucket: ServedBucket, deliveries: Deliveries, rate: float, settle: float, window: float,
                   drain: float) -> dict[str, Any]:
    """One rate on the current configuration: publish, settle, count, stop, drain, check."""
    run = uuid.uuid4().hex[:12]
    started, stop = threading.Event(), threading.Event()
    result: dict[str, Any] = {}

    def publish() -> None:
        result.update(workloads.publish_at_rate(
            bucket.svc.url, bucket.topics, rate=rate, duration_s=settle + window + 600.0,
            props=lambda _seq: {"bench_run": run}, on_sending=started.set, stop=stop,
        ))

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    if not started.wait(60):
        raise RuntimeError("the publisher's links did not attach in 60 s")
    time.sleep(settle)
    counted = bucket.window(window)
    stop.set()
    publisher.join(300)
    if publisher.is_alive() or not result:
        raise RuntimeError("the publisher did not finish within 300 s of its stop")
    sent_at: list[float] = result.pop("sent_at")
    in_window = sum(1 for t in sent_at if counted.start <= t < counted.end)
    expected = expected_deliveries(bucket.subscription_topic, len(bucket.topics), result["sent"],
                                   result["not_accepted"])
    want = sum(len(v) for v in expected.values())
    deadline = time.monotonic() + drain
    while sum(len(c) for c in deliveries.of_run(run).values()) < want and time.monotonic() < deadline:
        time.sleep(1.0)
    time.sleep(1.0)  # a duplicate right behind the last delivery still counts
    check = delivery_check(expected, deliveries.of_run(run))
    deliveries.forget(run)
    check.update(not_accepted=len(result["not_accepted"]), publisher_errors=result["error_count"],
                 publisher_timed_out=result["timed_out"])
    failed = bool(check["missing"] or check["duplicates"] or check["unexpected"] or check["not_accepted"]
                  or check["publisher_errors"] or check["publisher_timed_out"])
    result["not_accepted"] = result["not_accepted"][:10]
    return {
        "messages_in_window": in_window,
        "messages_per_s_in_window": round(in_window / (counted.end - counted.start), 2),
        **bill(counted.requests, bucket.clients, counted.end - counted.start, in_window),
        "failed": failed, "deliveries": check, "publisher": result, **counted.row,
    }


def idle_run(bucket: ServedBucket, settle: float, window: float) -> dict[str, Any]:
    """The idle row of the current configuration: nothing published."""
    time.sleep(settle)
    counted = bucket.window(window)
    return {"messages_in_window": 0, **bill(counted.requests, bucket.clients, counted.end - counted.start, 0),
            "failed": False, **counted.row}


def main(argv: list[str] | None = None) -> int:
    """Run every (configuration, rate) on one service; print JSON lines, the table and the limits."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="1x1,100x100", help="TxS: topics x subscriptions with a consumer, "
                   "comma-separated, non-decreasing (default 1x1,100x100)")
    p.add_argument("--rates", default="10,100,1000", help="msg/s in total over the T topics, comma-separated "
                   "(default 10,100,1000; the idle row, 0, is always counted first)")
    p.add_argument("--window", type=float, default=60.0, help="counted seconds per row (default 60)")
    p.add_argument("--settle", type=float, default=15.0, help="seconds of traffic before counting (default 15)")
    p.add_argument("--drain", type=float, default=120.0, help="seconds the last deliveries may take once the "
                   "publisher stopped (default 120)")
    p.add_argument("--store-delay-ms", type=float, default=0.0, help="ms the delay proxy in front of versitygw "
                   "adds to each answer (default 0: no proxy)")
    p.add_argument("--keep", action="store_true", help="keep the bucket, the logs and the host state dir")
    args = p.parse_args(argv)
    configs = parse_configs(args.configs, one_subscription_per_topic=False)
    rates = [float(x) for x in args.rates.split(",") if x.strip()]
    if any(r <= 0 for r in rates):
        raise SystemExit("--rates: msg/s above 0 (the idle row is always counted)")
    print(f"$ {shlex.join([os.path.relpath(sys.executable, ROOT), *sys.argv])}", flush=True)
    deliveries = Deliveries()
    rows: list[dict[str, Any]] = []
    with ServedBucket(name="bill", tmp_prefix="requests-bill-", log=log, keep=args.keep,
                      store_delay_ms=args.store_delay_ms,
                      consumer_options=lambda j: {"refill": True, "settle": deliveries.settle(j)}) as bucket:
        deliveries.subscribers = bucket.subscribers
        for t, s in configs:
            bucket.grow(t, s)
            for rate in [0.0, *rates]:
                if rate and not t:
                    continue  # nowhere to publish
                log(f"T={t} S={s} at {rate:g} msg/s: settling {args.settle:g} s, then counting {args.window:g} s")
                head = {"topics": t, "subscriptions": s, "rate": rate, "store_delay_ms": args.store_delay_ms}
                if rate:
                    row = {**head, **publishing_run(bucket, deliveries, rate, args.settle, args.window, args.drain)}
                else:
                    row = {**head, **idle_run(bucket, args.settle, args.window)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if row["failed"]:
                    log(f"T={t} S={s} at {rate:g} msg/s FAILED: {_failure(row)}")
    print("\nRequests at the S3 server while messages flow, and their price at S3 list prices:\n")
    print(table(rows))
    print()
    print(limits_line(rows))
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
