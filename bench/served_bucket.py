"""A real ``sharedsub serve`` on a bucket, grown to T topics × S subscriptions with a consumer
each, and its requests counted at the S3 server in windows: what bench/idle_requests.py and
bench/requests_bill.py share.

:class:`ServedBucket` starts a versitygw with its access log (tests/s3_server.py,
bench/s3_access_log.py) and one ``sharedsub serve`` (with its embedded fan-out job) on a bucket
of it (bench/sharedsub_service.py ``SharedSubS3Service``; with ``store_delay_ms`` reached
through the delay proxy, bench/delay_proxy.py), after telling its clients apart by user agent
(``s3_access_log.calibrate``). :meth:`ServedBucket.grow` creates topics ``<name>-<i>`` up to T
and attaches subscriptions up to S: subscription j a JMS shared durable subscription
``<name>-sub-<j>`` on topic j mod T (T as it is when j is attached) with one consumer
(tests/amqp_peer.py ``Subscriber``, container ``<name>-app-<j>``) that stays attached. Leaving
stops the consumers and the service, and deletes the logs unless ``keep``.

:func:`window` counts the requests at the server over one window by (client, verb, family), with
the front end's own ``sharedsub_object_store_requests_total`` on ``/metrics`` over the same
window (its scrapes bracket the access-log window) and the CPU of serve and of the S3 server;
it hands back the window's requests and times too, for counts of other shapes.
"""

from __future__ import annotations

import http.client
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any, NamedTuple

import procstat
import s3_access_log
import stages
from held_subscribers import PER_CHILD, HeldSubscribers
from sharedsub_service import SharedSubS3Service

from tests.amqp_peer import Subscriber, jms_shared_durable
from tests.prometheus_text import parse as parse_metrics

METRIC = "sharedsub_object_store_requests_total"
HELD_HERE = 200
"""Consumers attached in this process; more are held by children (bench/held_subscribers.py)."""


class Counted(NamedTuple):
    """One window: its figures (``row``), the requests the server logged in it, and when it
    started and ended (``time.monotonic()``)."""

    row: dict[str, Any]
    requests: list[s3_access_log.Request]
    start: float
    end: float


def parse_configs(text: str, *, one_subscription_per_topic: bool = True) -> list[tuple[int, int]]:
    """``"0x0,1x1,4x4"`` → [(0, 0), (1, 1), (4, 4)]; T and S must not decrease (each
    configuration adds to the one before on one service), S ≤ T unless
    ``one_subscription_per_topic`` is false."""
    out = []
    for item in text.split(","):
        t, _, s = item.strip().partition("x")
        out.append((int(t), int(s)))
    for (t0, s0), (t1, s1) in zip(out, out[1:], strict=False):
        if t1 < t0 or s1 < s0:
            raise SystemExit(f"--configs: each configuration adds to the one before ({t0}x{s0} then {t1}x{s1})")
    if one_subscription_per_topic and any(s > t for t, s in out):
        raise SystemExit("--configs: one subscription per topic at most (S ≤ T)")
    if any(s and not t for t, s in out):
        raise SystemExit("--configs: a subscription needs a topic (S > 0 with T = 0)")
    return out


def front_end_counts(url: str) -> dict[tuple[str, str], float]:
    """The front end's ``sharedsub_object_store_requests_total`` by (kind, family) now; empty
    when the scrape fails (seen: with 100 subscriptions on a store 20 ms away, /metrics reads
    every subscription table's backlog one request after another and serve's HTTP endpoint
    dropped the scrape): the access log's counts, which are the figures, do not depend on it."""
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            samples = parse_metrics(reply.read().decode())[1]
    except (OSError, http.client.HTTPException) as exc:
        print(f"[served_bucket] /metrics scrape failed: {exc!r}", file=sys.stderr, flush=True)
        return {}
    return {
        (dict(labels)["kind"], dict(labels)["family"]): value
        for (name, labels), value in samples.items()
        if name == METRIC
    }


def window(svc: SharedSubS3Service, access: s3_access_log.AccessLog, clients: dict[str, str],
           seconds: float) -> Counted:
    """Requests per second over one window: at the server by (client, verb, family), and on the
    front end's /metrics by (kind, family); with the requests the server logged in the window."""
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
    requests = access.since(start, end)
    at_server = s3_access_log.counts(requests, clients)
    # A scrape is not idle: /metrics' backlog figures read the subscription tables. What the
    # closing scrape cost (plus whatever else ran in its few ms) is left out of the window and
    # shown apart; the front end's own count over the window includes it.
    scrape = s3_access_log.counts(access.since(end, scraped), clients)
    return Counted({
        "window_s": round(span, 2),
        "loadavg_1m_before": load,
        # Cores kept busy: serve with its fan-out JVM and workers; the S3 server.
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
    }, requests, t0, t1)


class ServedBucket:
    """serve on a bucket of its own versitygw, with topics and consumed subscriptions added by
    :meth:`grow`; a context manager that always stops what it started.

    ``name`` prefixes the topics, subscriptions and containers; ``consumer_options(j)`` gives
    extra ``Subscriber`` keyword arguments for subscription j (its settlement, its credit)."""

    def __init__(
        self, *, name: str, tmp_prefix: str, log: Callable[[str], None], keep: bool = False,
        store_delay_ms: float = 0.0, consumer_options: Callable[[int], dict[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self._log = log
        self._keep = keep
        self._consumer_options = consumer_options or (lambda _j: {})
        self.out = tempfile.mkdtemp(prefix=tmp_prefix)
        self.access = s3_access_log.AccessLog(os.path.join(self.out, "access.log"))
        self.svc = SharedSubS3Service(log=log, log_path=os.path.join(self.out, "serve.log"),
                                      server_log_path=os.path.join(self.out, "versitygw.log"),
                                      access_log=self.access.path, keep_data=keep, store_delay_ms=store_delay_ms)
        self.clients: dict[str, str] = {}
        self.topics: list[str] = []
        self.subscribers: list[Subscriber] = []
        self.held: list[HeldSubscribers] = []  # beyond HELD_HERE, consumers in child processes
        self.subscription_topic: list[int] = []  # subscription j's topic, an index into topics

    def __enter__(self) -> ServedBucket:
        self.svc.__enter__()
        try:
            self.clients = s3_access_log.calibrate(self.access, f"s3://{self.svc.bucket}", self.svc.server.env())
            self._log(f"clients by user agent: {self.clients}")
            self._log(f"starting serve on {self.svc.data_dir}")
            start_s = self.svc.start()
            self._log(f"serve ready in {start_s:.1f} s at {self.svc.url}")
        except BaseException:
            self.svc.__exit__(None, None, None)
            raise
        return self

    def grow(self, topics: int, subscriptions: int) -> None:
        """Create topics up to ``topics`` and attach subscriptions up to ``subscriptions``."""
        new = [f"{self.name}-{i}" for i in range(len(self.topics), topics)]
        if new:
            self.svc.create_topics(new)
            self.topics += new
        while len(self.subscription_topic) < subscriptions:
            j = len(self.subscription_topic)
            if len(self.subscribers) >= HELD_HERE:
                # More consumers than one process's select() can wait on: in children, with the
                # default options (an idle count; their deliveries are not counted).
                js = range(j, min(subscriptions, j + PER_CHILD))
                specs = [(self.topics[i % len(self.topics)], f"{self.name}-sub-{i}", f"{self.name}-app-{i}") for i in js]
                self.held.append(HeldSubscribers(self.svc.url, specs))
                self.subscription_topic.extend(i % len(self.topics) for i in js)
                continue
            topic = self.topics[j % len(self.topics)]
            sub = Subscriber(self.svc.url, topic, container_id=f"{self.name}-app-{j}",
                             **jms_shared_durable(f"{self.name}-sub-{j}"), **self._consumer_options(j))
            sub.start()
            self.subscribers.append(sub)
            self.subscription_topic.append(j % len(self.topics))
            if not sub.attached.wait(60):
                raise RuntimeError(f"subscription {self.name}-sub-{j} on {topic} did not attach in 60 s: {sub.error}")

    def window(self, seconds: float) -> Counted:
        """:func:`window` on this service."""
        return window(self.svc, self.access, self.clients, seconds)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            for sub in self.subscribers:
                sub.stop()
            for held in self.held:
                held.stop()
            self.svc.stop()
        finally:
            self.svc.__exit__(None, None, None)
        if self._keep or exc_type is not None:
            self._log(f"logs kept in {self.out}")
        else:
            shutil.rmtree(self.out, ignore_errors=True)
