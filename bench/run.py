"""Benchmark sharedsub against RabbitMQ 3.10 (AMQP 1.0 plugin) and Apache ActiveMQ Artemis in one
run, reported as ratios.

    .venv/bin/python bench/run.py [--quick] [--only publish,latency,consume,amplification,fanout,many-subs]
                                  [--brokers rabbitmq[,artemis][,proton-floor],sharedsub[,sharedsub-nofsync]
                                             [,sharedsub-inthread][,sharedsub-s3]]
                                  [--runs N] [--store-delay-ms MS]
                                  [--write-results]
                                  [--consume-consumers 1,2,4] [--consume-count M]
                                  [--fanout-subs 1,100,1000] [--fanout-count M]
                                  [--many-subs 100,1000,10000] [--many-subs-count M]
                                  [--many-subs-consumers C] [--many-subs-idle S]

Measures, with the same client code against every broker: publish and consume with rhea
(``--client rhea``, the default: bench/rhea_client.js in a Node.js process, an AMQP 1.0 client
independent of Proton-C and light enough not to be the bound on a 2-core machine) or with
python-qpid-proton (``--client proton``); latency, amplification and fan-out with
python-qpid-proton:

1. publish: 1 KB durable messages, unsettled sender, at most 1000 in flight; a message counts
   once the broker's ``accepted`` arrived. Warm-up, then ``--count`` measured (msg/s).
2. latency: a steady 1,000 msg/s publisher and one subscriber; publish→delivery and
   publish→accepted p50/p99 over ``--duration`` s after ``--latency-warmup`` s.
3. consume (only when asked for with ``--only``: with the default counts it adds about 8 min
   to a run on a quiet machine, more on a busy one where each measurement first waits up to
   ``--wait-idle`` s): throughput of N = ``--consume-consumers`` consumers sharing one subscription.
   sharedsub: a global JMS 2.0 shared durable subscription (link ``<name>|global``, source
   capabilities topic/shared/global, durable unsettled-state, expiry never), created by attaching
   one consumer and detaching it; RabbitMQ: a durable queue bound to amq.topic (competing
   consumers). ``--consume-count`` 1 KB durable messages are published, then the run waits until
   all of them wait for the consumers (sharedsub: routed into the subscription's table, read from
   the data dir; RabbitMQ: ready in the queue; Artemis: the same JMS shared durable subscription,
   messages in its queue). Then N receivers attach, each on its own
   connection (one client process or thread), and only once all have
   attached each gets ``--prefetch`` credit, topped up per message. Every delivery is accepted
   (settled by the consumer: at-least-once, acknowledged). msg/s from the first delivery to
   the M-th distinct message accepted; per-consumer counts, duplicates, credit granted→first
   delivery, broker CPU over that span (sharedsub: serve with its Spark JVM). Afterwards an
   untimed check that nothing is left unacknowledged.
4. amplification (sharedsub only): bytes in a fresh data dir per published payload byte after
   N = 1, 10, 100 plain subscribers have each received all ``--amp-count`` messages.
5. fanout (only when asked for with ``--only``; RabbitMQ has no JMS selectors): (a) sharedsub
   only: routing throughput of the fan-out job for N = ``--fanout-subs``
   subscriptions with distinct selectors on one topic pre-loaded with ``--fanout-count`` 1 KB
   messages written straight into Delta, run once with available-now (published messages
   routed per second, first micro-batch start to last batch end); (b) end-to-end latency at
   ``--rate`` with ``--fanout-latency-subs`` selector subscribers attached next to the latency
   subscriber (sharedsub, and Artemis with ``--brokers ...,artemis``: there the selector
   subscribers are JMS global shared durable subscriptions). See bench/fanout_bench.py.
6. many-subs (only when asked for with ``--only``; sharedsub and Artemis, RabbitMQ has no JMS
   selectors; issue 41): for each N in ``--many-subs`` (default 100,1000,10000) a fresh broker
   (sharedsub: a fresh data dir with one topic; Artemis: a fresh instance), primed with 100
   messages end to end on another topic (untimed), then driven by rhea (bench/many_subs.py has
   the exact shape): N unshared durable subscriptions (JMS ``createDurableSubscriber``: link
   ``sub-<i>``, source durable unsettled-state, expiry never, capability topic, selector
   ``k = <i % 100>``; one fixed container id, the ClientID, on ceil(N / 500) connections; all
   attaches sent at once); C = ``--many-subs-consumers`` of them (default: all up to N = 1,000,
   1,000 above) keep a consumer with ``--prefetch`` credit, the others are detached (not
   closed) once made. Then ``--many-subs-count`` (default 10,000) 1 KB durable messages,
   properties ``k = n % 100`` and ``bench_seq = n``, from one unsettled publisher with
   ``--window`` in flight; every delivery accepted. ``--runs`` runs of each N, each on a fresh
   broker (the table gives their median). One ``many_subs`` line per broker, N and run:
   attach rate (N ÷ first attach sent → last answered, subs/s), publish msg/s (first send →
   last accepted), deliveries/s (expected deliveries, M × C / 100, ÷ first send → last expected
   delivery in; the span in s too), correctness (per consumer counts; duplicates: a bench_seq
   twice on one receiver not marked redelivered; missing by the end or ``--many-subs-timeout``;
   wrong: k not the selector's), broker CPU over that span and over the attaches, broker RSS at
   the end (sharedsub: serve with its Spark JVM, also by part). One ``many_subs_footprint``
   line: RSS per subscription ((RSS after the attaches − before) ÷ N; for sharedsub serve's own
   process and the fan-out's tree with its JVM separately) and idle CPU (broker CPU s over
   ``--many-subs-idle`` s, default 30, with every subscription made and no traffic, per
   subscription). For sharedsub the subscriptions and subscription tables of the topic at the
   end; for Artemis the topic address's queues. The broker is stopped and its state deleted
   after each N (the subscriptions go with it).

Artemis (``--brokers ...,artemis``; bench/artemis_peer.py: the binary distribution from Maven
Central, cached under ``~/.cache/sharedsub-bench``, a fresh instance per run with an NIO journal
synced before each durable send is accepted) publishes to a multicast address holding one
durable shared subscription per route; see that module for the addresses and settings.

The proton floor (``--brokers ...,proton-floor``; bench/proton_floor.py) is an in-memory queue
broker on python-qpid-proton and sharedsub's engine loop (connectors/amqp/wire/engine_loop.py), the
front end's own, that does no work per message (no decode, no storage). It takes part in publish
and consume only: its figures are the most any broker on that loop reaches here with the same
client.

sharedsub on object storage (``--brokers sharedsub,sharedsub-s3``; bench/sharedsub_service.py
``SharedSubS3Service``) is the same serve on an ``s3://`` data dir, a bucket of a versitygw
(tests/s3_server.py: ``SHAREDSUB_S3_SERVER`` or the bootstrap cache) that the run starts on
127.0.0.1 over a temp directory; publish, latency and consume are measured on it as on the
local data dir, and the table shows the ratio s3 ÷ local per row. ``--store-delay-ms 20`` puts a
delay proxy (bench/delay_proxy.py) between that versitygw and everything that reaches it (serve,
the CLI, this script's reads): every answer 20 ms late, a stand-in for S3 Standard (issue 42);
the settings line of the results records it.

RabbitMQ runs first (started and stopped by this script), then Artemis, then the proton floor,
then sharedsub; never two at once.
Each measurement prints one JSON line on stdout and appends it to bench/out/results-<UTC>.jsonl;
a markdown table follows at the end. Progress goes to stderr. Brokers are always stopped,
also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import fanout_bench
import many_subs
import procstat
import report
import rhea_workloads
import stages
import workloads
from artemis_peer import ArtemisPeer, topic_address
from proton_floor import ProtonFloorPeer
from rabbitmq_peer import RabbitMQPeer, Route
from sharedsub_service import SharedSubS3Service, SharedSubService, topic_name

BENCHES = ("publish", "latency", "consume", "amplification", "fanout", "many-subs")
DEFAULT_BENCHES = ("publish", "latency", "amplification")
# Variants of sharedsub, each measured as its own column beside the default one (report.VARIANTS):
# fsync off (what the fsync of every commit costs), appends on the committer thread instead of the
# append child process (what the GIL costs the commits; sharedsub.storage.commits.append_process).
VARIANT_ENV = {
    "sharedsub-nofsync": {"SHAREDSUB_STORAGE_FSYNC": "false"},
    "sharedsub-inthread": {"SHAREDSUB_STORAGE_APPEND_PROCESS": "false"},
}
S3_VARIANT = "sharedsub-s3"  # on an s3:// data dir (a local versitygw); ratio s3 ÷ local
BROKERS = ("rabbitmq", "artemis", "proton-floor", "sharedsub", *VARIANT_ENV, S3_VARIANT)
DEFAULT_BROKERS = ("rabbitmq", "sharedsub")
HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything that shapes the measurements; recorded with the results."""

    runs: int
    warmup: int
    count: int
    window: int
    size: int
    rate: float
    latency_warmup_s: float
    duration_s: float
    drain_s: float
    tick_ms: float
    prefetch: int
    amp_count: int
    amp_subscribers: tuple[int, ...]
    publish_timeout_s: float
    amp_timeout_s: float
    wait_idle_s: float
    idle_cores: float
    fanout_subs: tuple[int, ...]
    fanout_count: int
    fanout_commit_size: int
    fanout_latency_subs: int
    fanout_latency_matching: bool
    fanout_timeout_s: float
    fanout_drain_s: float
    consume_consumers: tuple[int, ...]
    consume_count: int
    consume_timeout_s: float
    consume_route_timeout_s: float
    many_subs: tuple[int, ...]
    many_subs_count: int
    many_subs_consumers: int | None  # None: all up to 1,000 subscriptions, 1,000 above (many_subs.consumers_for)
    many_subs_idle_s: float
    many_subs_links_per_connection: int
    many_subs_timeout_s: float
    client: str  # publish and consume workloads: "rhea" (bench/rhea_client.js) or "proton"
    store_delay_ms: float  # sharedsub-s3: ms the delay proxy adds to each answer of its versitygw (0: none)


def _csv(choices: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        bad = [x for x in items if x not in choices]
        if bad or not items:
            msg = f"expected a comma-separated subset of {', '.join(choices)}, got {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return items

    return parse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small counts and short windows (a few minutes in all)")
    p.add_argument("--only", type=_csv(BENCHES), default=DEFAULT_BENCHES,
                   help="measurements to run (default: publish,latency,amplification; consume and fanout only "
                   "on request)")
    p.add_argument("--brokers", type=_csv(BROKERS), default=DEFAULT_BROKERS,
                   help="brokers to measure (default: rabbitmq,sharedsub; artemis is Apache ActiveMQ Artemis, "
                        "downloaded with mvn on first use; proton-floor is bench/proton_floor.py, an in-memory "
                        "broker on python-qpid-proton and sharedsub's engine loop doing no work per message (publish and "
                        "consume only); sharedsub-nofsync is sharedsub "
                        "with [storage] fsync off, sharedsub-inthread with [storage] append_process off, "
                        "sharedsub-s3 on an s3:// data dir on a local versitygw started by the run, "
                        "each reported in its own column with the ratio to the default)")
    p.add_argument("--runs", type=int, help="runs per measurement and broker (default 3, --quick 1)")
    p.add_argument("--count", type=int, help="measured messages per publish run (default 20000, --quick 3000)")
    p.add_argument("--warmup", type=int, help="warm-up messages per publish run (default 2000, --quick 500)")
    p.add_argument("--window", type=int, default=1000, help="max unaccepted messages in flight (default 1000)")
    p.add_argument("--size", type=int, default=1024, help="body bytes per message (default 1024)")
    p.add_argument("--rate", type=float, default=1000.0, help="latency publish rate, msg/s (default 1000)")
    p.add_argument("--duration", type=float, help="latency measured window, s (default 10, --quick 3)")
    p.add_argument("--latency-warmup", type=float, help="latency warm-up, s (default 1, --quick 0.5)")
    p.add_argument("--drain", type=float, default=30.0, help="latency: wait for stragglers after the last send, s")
    p.add_argument("--tick-ms", type=float, default=2.0, help="latency: the publisher sends what is due every "
                   "this many ms (default 2: two messages per tick at 1k msg/s; 1 costs the client ~0.25 core more)")
    p.add_argument("--prefetch", type=int, default=100, help="receiver credit per subscriber link (default 100)")
    p.add_argument("--amp-count", type=int, help="amplification: messages published (default 2000, --quick 200)")
    p.add_argument("--amp-subscribers", default="1,10,100", help="amplification: subscriber counts (default 1,10,100)")
    p.add_argument("--fanout-subs", help="fanout: selector subscription counts (default 1,100,1000, --quick 1,10,100)")
    p.add_argument("--fanout-count", type=int, help="fanout: messages pre-loaded (default 20000, --quick 2000)")
    p.add_argument("--fanout-commit-size", type=int, default=1000, help="fanout: messages per pre-loaded topic "
                   "commit (default 1000)")
    p.add_argument("--fanout-latency-subs", type=int, default=100, help="fanout: selector subscribers attached "
                   "during the latency measurement (default 100)")
    p.add_argument("--fanout-latency-selectors", choices=("matching", "idle"), default="matching",
                   help="fanout latency: 'matching' = the messages carry the properties the selectors test "
                   "(each selector matches ~5.6%%), 'idle' = they carry none, so every selector is evaluated and "
                   "none matches (routing load without deliveries to the selector subscribers)")
    p.add_argument("--fanout-drain", type=float, default=120.0, help="fanout latency: wait for stragglers after "
                   "the last send, s (default 120: every micro-batch evaluates all selectors)")
    p.add_argument("--consume-consumers", default="1,2,4", help="consume: consumer counts on one shared "
                   "subscription / queue (default 1,2,4)")
    p.add_argument("--consume-count", type=int, help="consume: messages pre-loaded and drained (default 20000, "
                   "--quick 3000)")
    p.add_argument("--many-subs", help="many-subs: unshared durable subscription counts (default 100,1000,10000, "
                   "--quick 100,1000)")
    p.add_argument("--many-subs-count", type=int, help="many-subs: messages published (default 10000, --quick 2000)")
    p.add_argument("--many-subs-consumers", type=int, help="many-subs: subscriptions with a consumer attached "
                   "(default: all up to 1,000 subscriptions, 1,000 above; the others are made and detached)")
    p.add_argument("--many-subs-idle", type=float, help="many-subs: seconds the idle broker's CPU is measured with "
                   "every subscription made (default 30, --quick 10)")
    p.add_argument("--many-subs-links-per-connection", type=int, default=500, help="many-subs: subscriber links "
                   "per connection (default 500)")
    p.add_argument("--many-subs-timeout", type=float, help="many-subs: time limit of the attaches, and of "
                   "publishing and delivering, s (default 1800, --quick 600)")
    p.add_argument("--wait-idle", type=float, help="before each timed measurement wait up to this many s for other "
                   "processes to go quiet (default 30, --quick 10; 0 = don't wait)")
    p.add_argument("--idle-cores", type=float, default=0.25, help="'quiet' = others keep at most this many cores busy")
    p.add_argument("--client", choices=("rhea", "proton"), default="rhea",
                   help="client of the publish and consume workloads: rhea (Node.js, independent of Proton-C; "
                   "default) or python-qpid-proton (the latency, amplification and fan-out workloads always use it)")
    p.add_argument("--store-delay-ms", type=float, default=0.0, help="sharedsub-s3: reach its versitygw "
                   "through bench/delay_proxy.py, which hands every answer back this many ms late (20: a "
                   "stand-in for S3 Standard; default 0, no proxy)")
    p.add_argument("--write-results", action="store_true", help="append this run's table to bench/RESULTS.md")
    p.add_argument("--keep-state", action="store_true", help="keep broker state and data dirs (paths go to stderr)")
    p.add_argument("--out-dir", default=os.path.join(HERE, "out"), help="where results-<UTC>.jsonl goes")
    return p.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    q = args.quick

    def pick(value: Any, default: Any, quick: Any) -> Any:
        return value if value is not None else (quick if q else default)

    return Settings(
        runs=pick(args.runs, 3, 1),
        warmup=pick(args.warmup, 2000, 500),
        count=pick(args.count, 20000, 3000),
        window=args.window,
        size=args.size,
        rate=args.rate,
        latency_warmup_s=pick(args.latency_warmup, 1.0, 0.5),
        duration_s=pick(args.duration, 10.0, 3.0),
        drain_s=args.drain,
        tick_ms=args.tick_ms,
        prefetch=args.prefetch,
        amp_count=pick(args.amp_count, 2000, 200),
        amp_subscribers=tuple(int(x) for x in args.amp_subscribers.split(",") if x.strip()),
        publish_timeout_s=pick(None, 180.0, 90.0),
        amp_timeout_s=pick(None, 600.0, 300.0),
        wait_idle_s=pick(args.wait_idle, 30.0, 10.0),
        idle_cores=args.idle_cores,
        fanout_subs=tuple(int(x) for x in pick(args.fanout_subs, "1,100,1000", "1,10,100").split(",") if x.strip()),
        fanout_count=pick(args.fanout_count, 20000, 2000),
        fanout_commit_size=args.fanout_commit_size,
        fanout_latency_subs=args.fanout_latency_subs,
        fanout_latency_matching=args.fanout_latency_selectors == "matching",
        fanout_timeout_s=pick(None, 1200.0, 400.0),
        fanout_drain_s=args.fanout_drain,
        consume_consumers=tuple(int(x) for x in args.consume_consumers.split(",") if x.strip()),
        consume_count=pick(args.consume_count, 20000, 3000),
        consume_timeout_s=pick(None, 600.0, 300.0),
        consume_route_timeout_s=pick(None, 600.0, 300.0),
        many_subs=tuple(int(x) for x in pick(args.many_subs, "100,1000,10000", "100,1000").split(",") if x.strip()),
        many_subs_count=pick(args.many_subs_count, 10000, 2000),
        many_subs_consumers=args.many_subs_consumers,
        many_subs_idle_s=pick(args.many_subs_idle, 30.0, 10.0),
        many_subs_links_per_connection=args.many_subs_links_per_connection,
        many_subs_timeout_s=pick(args.many_subs_timeout, 1800.0, 600.0),
        client=args.client,
        store_delay_ms=args.store_delay_ms,
    )


def log(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class Recorder:
    """Prints each line as JSON on stdout and appends it to the run's .jsonl file."""

    def __init__(self, out_dir: str, stamp: str) -> None:
        os.makedirs(out_dir, exist_ok=True)
        self.out_dir, self.stamp = out_dir, stamp
        self.path = os.path.join(out_dir, f"results-{stamp}.jsonl")
        self.lines: list[dict[str, Any]] = []

    def side_file(self, name: str) -> str:
        """Return a path next to the results file for a log belonging to this run."""
        return os.path.join(self.out_dir, f"{self.stamp}-{name}")

    def emit(self, line: dict[str, Any]) -> None:
        line = {"ts": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), **line}
        self.lines.append(line)
        text = json.dumps(line, default=str)
        print(text, flush=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


def before_measurement(broker_pid: int | None, s: Settings, *, wait: bool = True) -> dict[str, Any]:
    """Wait (bounded) for other processes to go quiet; return load figures to record."""
    exclude = [broker_pid] if broker_pid else []
    t0 = time.monotonic()
    busy = procstat.other_busy_cores(exclude, 1.0)
    warned = False
    while wait and busy > s.idle_cores and time.monotonic() - t0 < s.wait_idle_s:
        if not warned:
            log(f"other processes keep {busy:.2f} cores busy; waiting up to {s.wait_idle_s:.0f} s for quiet")
            warned = True
        busy = procstat.other_busy_cores(exclude, 2.0)
    return {
        "loadavg_1m_before": procstat.loadavg_1m(),
        "other_busy_cores_before": round(busy, 2),
        "idle_wait_s": round(time.monotonic() - t0, 1),
        "machine_quiet_before": busy <= s.idle_cores,
    }


Target = RabbitMQPeer | ArtemisPeer | ProtonFloorPeer | SharedSubService


def publish_client(s: Settings) -> Any:
    """The module whose ``publish_throughput`` the publish and consume workloads use."""
    return rhea_workloads if s.client == "rhea" else workloads


def measure_publish(t: Target, run: int, s: Settings, rec: Recorder) -> None:
    route = t.route(f"pub-r{run}", subscribe=False)
    pre = before_measurement(t.broker_pid(), s)
    log(f"{t.name} publish run {run}: {s.warmup} + {s.count} messages")
    res = publish_client(s).publish_throughput(
        t.url, route.publish_address, warmup=s.warmup, count=s.count, window=s.window, size=s.size,
        timeout_s=s.publish_timeout_s, cpu_probe=t.cpu_probe(),
    )
    t.release(route)
    per_1k = None
    if res.get("broker_cpu_s") is not None and res["measured_accepted"]:
        per_1k = res["broker_cpu_s"] / res["measured_accepted"] * 1000
    rec.emit({
        "bench": "publish", "broker": t.name, "run": run, "address": route.publish_address,
        "warmup": s.warmup, "count": s.count, "window": s.window, "size": s.size, **pre, **res,
        "broker_cpu_s_per_1k_msgs": per_1k, "broker_rss_bytes": t.rss_bytes(),
    })


def measure_latency(t: Target, run: int, s: Settings, rec: Recorder) -> None:
    route = t.route(f"lat-r{run}", subscribe=True)
    pre = before_measurement(t.broker_pid(), s)
    log(f"{t.name} latency run {run}: {s.rate:.0f} msg/s, {s.latency_warmup_s} s + {s.duration_s} s")
    cpu_before = t.cpu_by_command()
    res = workloads.latency_at_rate(
        t.url, route.publish_address, route.subscribe_address, rate=s.rate, warmup_s=s.latency_warmup_s,
        duration_s=s.duration_s, drain_s=s.drain_s, size=s.size, window=s.window, prefetch=s.prefetch,
        timeout_s=s.latency_warmup_s + s.duration_s + s.drain_s + 60, cpu_probe=t.cpu_probe(),
        tick_s=s.tick_ms / 1000,
    )
    t.release(route)
    rec.emit({
        "bench": "latency", "broker": t.name, "run": run, "publish_address": route.publish_address,
        "subscribe_address": route.subscribe_address, "rate": s.rate, "warmup_s": s.latency_warmup_s,
        "duration_s": s.duration_s, "size": s.size, "prefetch": s.prefetch, "tick_ms": s.tick_ms, **pre, **res,
        # Over the measured window: publishing, storing and delivering each message.
        "broker_cpu_s_per_1k_msgs": cpu_per_1k(res.get("broker_cpu_s"), res.get("measured_sent")),
        "broker_rss_bytes": t.rss_bytes(),
        # Which of the broker's processes did the work, over the whole workload (warm-up and drain too).
        "broker_cpu_s_by_command_whole_workload": procstat.cpu_by_command_delta(cpu_before, t.cpu_by_command()),
    })


def wait_backlog(t: Target, route: Route, subscription: str | None, want: int, timeout_s: float) -> dict[str, Any]:
    """Poll until ``want`` messages wait for the consumers: for sharedsub, routed into the
    subscription's table and not acknowledged; for RabbitMQ, ready in the queue; for Artemis, in
    the subscription's queue. Returns the
    last figures seen and the seconds waited (``backlog_ready`` false when the time ran out)."""
    t0 = time.monotonic()
    while True:
        if isinstance(t, SharedSubService):
            routed, waiting = t.subscription_counts(f"global:{subscription}")
        else:
            routed = waiting = t.ready_messages(route)
        ready = waiting >= want
        if ready or time.monotonic() - t0 > timeout_s:
            return {"backlog_routed": routed, "backlog_waiting": waiting, "backlog_ready": ready,
                    "backlog_wait_s": round(time.monotonic() - t0, 2)}
        time.sleep(0.5)


def wait_drained(t: Target, route: Route, subscription: str | None, timeout_s: float) -> dict[str, Any]:
    """After the consumers closed, poll (bounded) until the broker holds no unacknowledged
    message of the run: their accepts reached it and were made durable. Untimed, a check only."""
    t0 = time.monotonic()
    while True:
        if isinstance(t, SharedSubService):
            _, left = t.subscription_counts(f"global:{subscription}")
        else:
            left = t.ready_messages(route)
        if left == 0 or time.monotonic() - t0 > timeout_s:
            return {"unacknowledged_after": left, "drained_check_s": round(time.monotonic() - t0, 2)}
        time.sleep(0.5)


def measure_consume(t: Target, run: int, n: int, s: Settings, rec: Recorder) -> None:
    """Pre-load ``consume_count`` messages for one subscription (sharedsub and Artemis: a global
    shared durable subscription; RabbitMQ: a durable queue), then drain them with ``n`` consumers."""
    label = consume_label(run, n)
    route = t.route(label, subscribe=True)
    subscription = None
    consume_address = route.subscribe_address
    if isinstance(t, SharedSubService):
        subscription = route.publish_address  # one topic and one subscription of the same name per run
        link_name = workloads.shared_durable_link_name(subscription)
        configure = workloads.shared_durable_source
        created = workloads.create_subscription(t.url, route.subscribe_address, link_name, configure)
    elif isinstance(t, ArtemisPeer):
        # route() made the subscription (attach + detach); the consumers join it on the address.
        consume_address = route.publish_address
        link_name, configure = route.link_name, workloads.shared_durable_source
        created = t.created.get(label, {})
    else:
        link_name, configure, created = "bench-consumer", None, {}
    log(f"{t.name} consume N={n} run {run}: pre-loading {s.consume_count} messages")
    load = publish_client(s).publish_throughput(
        t.url, route.publish_address, warmup=0, count=s.consume_count, window=s.window, size=s.size,
        timeout_s=s.publish_timeout_s,
    )
    if load["accepted"] != s.consume_count:
        raise RuntimeError(f"pre-load: {load['accepted']} of {s.consume_count} accepted ({load['errors'][:3]})")
    backlog = wait_backlog(t, route, subscription, s.consume_count, s.consume_route_timeout_s)
    if not backlog["backlog_ready"]:
        raise RuntimeError(f"backlog not ready after {s.consume_route_timeout_s:.0f} s: {backlog}")
    pre = before_measurement(t.broker_pid(), s)
    log(f"{t.name} consume N={n} run {run}: {n} consumer(s), prefetch {s.prefetch}, "
        f"{s.consume_count} messages (backlog ready after {backlog['backlog_wait_s']} s)")
    cpu_before = t.cpu_by_command()
    if s.client == "rhea":
        res = rhea_workloads.consume_backlog(
            t.url, consume_address, consumers=n, count=s.consume_count, prefetch=s.prefetch,
            link_name=link_name, shared_durable=configure is workloads.shared_durable_source,
            timeout_s=s.consume_timeout_s, cpu_probe=t.cpu_probe(),
        )
    else:
        res = workloads.consume_backlog(
            t.url, consume_address, consumers=n, count=s.consume_count, prefetch=s.prefetch,
            link_name=link_name, configure=configure, timeout_s=s.consume_timeout_s, cpu_probe=t.cpu_probe(),
        )
    rss = t.rss_bytes()
    # Which of the broker's processes did the work (sharedsub: front end vs Spark JVM and workers),
    # over the whole consume workload (attach to close), not just the measured span.
    by_command = procstat.cpu_by_command_delta(cpu_before, t.cpu_by_command())
    drained = wait_drained(t, route, subscription, 30.0)
    t.release(route)
    per_1k = None
    if res.get("broker_cpu_s") is not None and res["distinct_accepted"]:
        per_1k = res["broker_cpu_s"] / res["distinct_accepted"] * 1000
    firsts = res["per_consumer_first_accepted"]
    rec.emit({
        "bench": "consume", "broker": t.name, "run": run, "subscribers": n, "count": s.consume_count,
        "size": s.size, "prefetch": s.prefetch, "subscribe_address": route.subscribe_address,
        "consume_address": consume_address, "link_name": link_name, "subscription_create": created,
        "preload_msgs_per_s": load["msgs_per_s"], "preload_s": load["measured_s"], **backlog, **pre, **res,
        **drained, "broker_cpu_s_per_1k_msgs": per_1k, "broker_rss_bytes": rss,
        "broker_cpu_s_by_command_whole_workload": by_command,
        # Share of the distinct messages the least busy consumer took (1/N when perfectly even).
        "min_consumer_share": min(firsts) / s.consume_count if firsts else None,
    })


def consume_label(run: int, n: int) -> str:
    """Topic/queue label of one consume measurement."""
    return f"con{n}-r{run}"


def prime(t: Target, rec: Recorder) -> None:
    """Push 100 messages end to end once, untimed, so first-use costs stay out of the runs."""
    route = t.route("prime", subscribe=True)
    log(f"{t.name}: priming (100 messages end to end)")
    res = workloads.fanout_deliver(t.url, route.publish_address, route.subscribe_address,
                                   subscribers=1, count=100, timeout_s=180)
    t.release(route)
    rec.emit({"bench": "prime", "broker": t.name, **res})


def guarded(rec: Recorder, base: dict[str, Any], fn: Callable[[], None]) -> None:
    """Run one measurement; an exception becomes an error line and the run goes on."""
    try:
        fn()
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one failed measurement must not stop the others
        log(f"{base}: {type(exc).__name__}: {exc}")
        rec.emit({**base, "error": f"{type(exc).__name__}: {exc}"})


Step = tuple[str, int, int | None]  # (bench, run, consumers for "consume" else None)


def planned(benches: tuple[str, ...], s: Settings) -> list[Step]:
    """The measurements run on one long-lived broker, in order: per run publish, latency, then
    consume for each consumer count."""
    out: list[Step] = []
    for r in range(1, s.runs + 1):
        out += [(b, r, None) for b in ("publish", "latency") if b in benches]
        if "consume" in benches:
            out += [("consume", r, n) for n in s.consume_consumers]
    return out


def step_label(b: str, r: int, n: int | None) -> str:
    """Topic/queue label of one step (sharedsub topics are created before serve starts)."""
    return consume_label(r, n) if b == "consume" and n is not None else f"{b[:3]}-r{r}"


def run_step(t: Target, step: Step, s: Settings, rec: Recorder) -> None:
    """Run one planned measurement against the started broker ``t``."""
    b, r, n = step
    if b == "publish":
        measure_publish(t, r, s, rec)
    elif b == "latency":
        measure_latency(t, r, s, rec)
    else:
        assert n is not None
        measure_consume(t, r, n, s, rec)


def step_base(t: Target, step: Step) -> dict[str, Any]:
    """The identifying fields of a step's error line."""
    b, r, n = step
    return {"bench": b, "broker": t.name, "run": r, **({"subscribers": n} if n is not None else {})}


def _stages(t: Target) -> dict[str, Any] | None:
    """sharedsub's per-stage histograms now (None for other brokers, or when /metrics fails)."""
    if not isinstance(t, SharedSubService):
        return None
    try:
        return stages.scrape(stages.metrics_url(t.data_dir))
    except (OSError, SystemExit) as exc:
        log(f"{t.name}: no stage timings ({exc})")
        return None


def _stage_report(t: Target, step: Step, before: dict[str, Any] | None, rec: Recorder) -> None:
    """Where sharedsub's time went during ``step`` (warm-up included): a table in the log and a
    ``stages`` line in the results (bench/stages.py)."""
    after = _stages(t) if before is not None else None
    if before is None or after is None:
        return
    try:
        rows = stages.report(before, after)
    except Exception as exc:  # noqa: BLE001 - a report we cannot make must not end the run
        log(f"{t.name}: stage report failed: {type(exc).__name__}: {exc}")
        return
    rec.emit({**step_base(t, step), "bench": "stages", "step": step[0], "stages": rows})
    log(f"{t.name} {step_label(*step)}: where the time went (whole step, warm-up included)\n{stages.table(rows)}")


def run_broker(t: Target, benches: tuple[str, ...], s: Settings, rec: Recorder, version: Callable[[], str]) -> None:
    """Start ``t``, prime it, run the publish/latency/consume measurements, stop it (always)."""
    plan = planned(benches, s)
    if not plan:
        return
    with t:
        try:
            if isinstance(t, SharedSubService):
                t.create_topics(t.route(label, subscribe=False).publish_address
                                for label in ["prime", *[step_label(*step) for step in plan]])
            log(f"starting {t.name}")
            start_s = t.start()
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, then the other broker still runs
            log(f"{t.name} did not start: {exc}")
            rec.emit({"bench": "broker_start", "broker": t.name, "error": f"{type(exc).__name__}: {exc}"})
            for step in plan:
                rec.emit({**step_base(t, step), "error": f"{t.name} did not start"})
            return
        rec.emit({"bench": "broker_start", "broker": t.name, "start_s": round(start_s, 2), "url": t.url,
                  "version": version(), "broker_rss_bytes": t.rss_bytes()})
        guarded(rec, {"bench": "prime", "broker": t.name}, lambda: prime(t, rec))
        for step in plan:
            before = _stages(t)
            guarded(rec, step_base(t, step), lambda step=step: run_step(t, step, s, rec))
            _stage_report(t, step, before, rec)
        t0 = time.perf_counter()
        t.stop()
        rec.emit({"bench": "broker_stop", "broker": t.name, "stop_s": round(time.perf_counter() - t0, 2)})


def measure_amplification(n: int, s: Settings, rec: Recorder, keep: bool) -> None:
    """Fresh data dir, one topic, ``n`` subscribers, publish, wait for all, measure the dir."""
    svc = SharedSubService(log=log, log_path=rec.side_file(f"serve-amp{n}.log"), keep_data=keep)
    with svc:
        route = svc.route("amp", subscribe=True)
        svc.create_topics([route.publish_address])
        after_create = procstat.dir_bytes(svc.data_dir)
        log(f"sharedsub amplification N={n}: starting serve on a fresh data dir")
        start_s = svc.start()
        pre = before_measurement(svc.broker_pid(), s, wait=False)
        baseline = procstat.dir_bytes(svc.data_dir)
        log(f"sharedsub amplification N={n}: {n} subscribers, {s.amp_count} messages")
        res = workloads.fanout_deliver(
            svc.url, route.publish_address, route.subscribe_address, subscribers=n, count=s.amp_count,
            size=s.size, window=s.window, prefetch=s.prefetch, timeout_s=s.amp_timeout_s,
        )
        after = procstat.dir_bytes(svc.data_dir)
        breakdown = procstat.dir_breakdown(svc.data_dir)
        svc.stop()
        after_stop = procstat.dir_bytes(svc.data_dir)
        payload = s.amp_count * s.size
        ok = res["all_delivered"]
        rec.emit({
            "bench": "amplification", "broker": "sharedsub", "subscribers": n, "count": s.amp_count,
            "size": s.size, "payload_bytes": payload, "start_s": round(start_s, 2), **pre, **res,
            "dir_after_topic_create": after_create, "dir_at_ready": baseline, "dir_all_delivered": after,
            "dir_after_stop": after_stop, "dir_all_delivered_by_entry": breakdown,
            # Only a complete delivery gives a meaningful ratio.
            "bytes_per_payload_byte": after["apparent_bytes"] / payload if ok else None,
            "du_bytes_per_payload_byte": after["du_bytes"] / payload if ok else None,
            "growth_per_payload_byte": (after["apparent_bytes"] - baseline["apparent_bytes"]) / payload if ok else None,
            "bytes_per_payload_byte_after_stop": after_stop["apparent_bytes"] / payload if ok else None,
        })


RABBITMQ_NO_SELECTORS = ("RabbitMQ (3.10, AMQP 1.0 plugin) has no JMS message selectors, so the fanout "
                         "measurements leave it out (the Artemis peer takes part in the latency part)")


def measure_fanout_throughput(n: int, s: Settings, rec: Recorder, keep: bool) -> None:
    """Fresh data dir, M pre-loaded messages, ``n`` selector subscriptions, one available-now run."""
    pre = before_measurement(None, s)
    log(f"sharedsub fanout throughput N={n}: M={s.fanout_count}")
    res = fanout_bench.routing_throughput(
        n, s.fanout_count, s.size, s.fanout_commit_size, s.fanout_timeout_s,
        rec.side_file(f"fanout-job-n{n}.log"), log, keep,
    )
    rec.emit({"bench": "fanout_throughput", "broker": "sharedsub", "subscribers": n, **pre, **res})


def fanout_latency_run(t: Target, route: Route, s: Settings, *, shared_durable: bool) -> dict[str, Any]:
    """Attach ``fanout_latency_subs`` selector subscribers to ``route``'s topic in a background
    container, then run the latency workload (its messages carry the properties the selectors
    test) on the started broker ``t``; return the figures of the line to record."""
    n = s.fanout_latency_subs
    subs = fanout_bench.SelectorSubscribers(t.url, route.publish_address, n, prefetch=s.prefetch,
                                            shared_durable=shared_durable)
    t0 = time.perf_counter()
    subs.start()
    try:
        if not subs.all_open.wait(120):
            raise RuntimeError(f"only {subs.opened} of {n} selector subscribers attached in 120 s: {subs.errors[:3]}")
        attach_s = time.perf_counter() - t0
        pre = before_measurement(t.broker_pid(), s)
        log(f"{t.name} fanout latency: {n} selector subscribers attached in {attach_s:.1f} s; "
            f"{s.rate:.0f} msg/s, {s.latency_warmup_s} s + {s.duration_s} s")
        res = workloads.latency_at_rate(
            t.url, route.publish_address, route.subscribe_address, rate=s.rate,
            warmup_s=s.latency_warmup_s, duration_s=s.duration_s, drain_s=s.fanout_drain_s, size=s.size,
            window=s.window, prefetch=s.prefetch,
            timeout_s=s.latency_warmup_s + s.duration_s + s.fanout_drain_s + 120, cpu_probe=t.cpu_probe(),
            tick_s=s.tick_ms / 1000, props=fanout_bench.message_properties if s.fanout_latency_matching else None,
        )
        received = subs.received
    finally:
        subs.stop()
    return {
        "bench": "fanout_latency", "broker": t.name, "subscribers": n, "rate": s.rate,
        "warmup_s": s.latency_warmup_s, "duration_s": s.duration_s, "size": s.size, "prefetch": s.prefetch,
        "tick_ms": s.tick_ms, "drain_s": s.fanout_drain_s, "selector_subs_attach_s": round(attach_s, 2),
        "selector_subs_shared_durable": shared_durable, "selectors_matching": s.fanout_latency_matching,
        **pre, **res,
        "broker_cpu_s_per_1k_msgs": cpu_per_1k(res.get("broker_cpu_s"), res.get("measured_sent")),
        # Deliveries to the selector subscribers by the time the latency workload ended, and
        # how many (message, selector) matches the published messages make in all.
        "selector_subs_received": received,
        "selector_subs_expected": fanout_bench.expected_matches(res["sent"], n) if s.fanout_latency_matching else 0,
        "selector_subs_errors": subs.errors[:5], "broker_rss_bytes": t.rss_bytes(),
    }


def measure_fanout_latency(s: Settings, rec: Recorder, keep: bool) -> None:
    """serve on a fresh data dir; ``fanout_latency_subs`` selector subscribers (plain links, one
    subscription each); then the latency workload (see :func:`fanout_latency_run`)."""
    svc = SharedSubService(log=log, log_path=rec.side_file("serve-fanout-latency.log"), keep_data=keep)
    with svc:
        route = svc.route("fanlat", subscribe=True)
        svc.create_topics([route.publish_address])
        log("sharedsub fanout latency: starting serve on a fresh data dir")
        start_s = svc.start()
        line = fanout_latency_run(svc, route, s, shared_durable=False)
        svc.stop()
        rec.emit({**line, "start_s": round(start_s, 2), "broker_stop_s": svc.stop_s})


def measure_fanout_latency_artemis(s: Settings, rec: Recorder, keep: bool) -> None:
    """A fresh Artemis instance; ``fanout_latency_subs`` JMS global shared durable subscriptions
    with distinct selectors on the latency route's multicast address, each with one consumer;
    then the latency workload (see :func:`fanout_latency_run`)."""
    peer = ArtemisPeer(log=log, keep_state=keep, log_path=rec.side_file("artemis-fanout-latency.log"))
    with peer:
        log("artemis fanout latency: starting a fresh instance")
        start_s = peer.start()
        route = peer.route("fanlat", subscribe=True)
        line = fanout_latency_run(peer, route, s, shared_durable=True)
        t0 = time.perf_counter()
        peer.stop()
        rec.emit({**line, "start_s": round(start_s, 2), "version": peer.version,
                  "broker_stop_s": round(time.perf_counter() - t0, 2)})


RABBITMQ_NO_MANY_SUBS = ("RabbitMQ (3.10, AMQP 1.0 plugin) has no JMS selectors, so the many-subs measurement "
                         "leaves it out")


def many_subs_shape(n: int, s: Settings) -> many_subs.Shape:
    """The many-subs run of ``n`` subscriptions under these settings."""
    return many_subs.Shape(
        subscriptions=n, consumers=many_subs.consumers_for(n, s.many_subs_consumers), count=s.many_subs_count,
        size=s.size, window=s.window, prefetch=s.prefetch, links_per_connection=s.many_subs_links_per_connection,
        idle_s=s.many_subs_idle_s, timeout_s=s.many_subs_timeout_s,
    )


def measure_many_subs(broker: str, n: int, s: Settings, rec: Recorder, keep: bool, run: int = 1) -> None:
    """Run ``run`` of ``n`` subscriptions on a fresh broker (sharedsub: serve on a fresh data dir
    holding the topic; Artemis: a fresh instance): start, prime, bench/many_subs.py's run, stop;
    the subscriptions go with the broker's state."""
    shape = many_subs_shape(n, s)
    t: SharedSubService | ArtemisPeer
    if broker == "sharedsub":
        t = SharedSubService(log=log, log_path=rec.side_file(f"serve-many{n}-r{run}.log"), keep_data=keep)
        address = topic_name(many_subs.LABEL)
    else:
        t = ArtemisPeer(log=log, keep_state=keep, log_path=rec.side_file(f"artemis-many{n}-r{run}.log"))
        address = topic_address(many_subs.LABEL)
    with t:
        if isinstance(t, SharedSubService):
            t.create_topics([address, t.route("prime", subscribe=False).publish_address])
        log(f"{t.name} many-subs N={n}: starting a fresh broker")
        start_s = t.start()
        version = _sharedsub_version() if isinstance(t, SharedSubService) else t.version
        prime(t, rec)
        pre = before_measurement(t.broker_pid(), s)
        log(f"{t.name} many-subs N={n}: {n} subscriptions, {shape.consumers} with a consumer; "
            f"{shape.count} messages")
        line, footprint = many_subs.run(t, address, shape, log)
        if isinstance(t, SharedSubService):
            at_end: dict[str, Any] = t.subscription_tables(address)
        else:
            at_end = {"subscription_queues": t.subscription_queues(address)}
        rec.emit({"bench": "many_subs", "broker": t.name, "run": run, "start_s": round(start_s, 2),
                  "version": version, **pre, **line, **at_end})
        rec.emit({"bench": "many_subs_footprint", "broker": t.name, "run": run, **footprint})
        log(f"{t.name} many-subs N={n}: {many_subs.correctness(line)}; at the end {at_end}")


def many_subs_plan(s: Settings) -> list[tuple[int, int]]:
    """The many-subs runs, ``(subscriptions, run)``: ``--runs`` of each count, a count's runs
    one after the other (the report gives their median)."""
    return [(n, r) for n in s.many_subs for r in range(1, s.runs + 1)]


def cpu_per_1k(cpu_s: float | None, messages: int | None) -> float | None:
    """Broker CPU seconds per 1,000 messages, or None when either figure is missing."""
    return cpu_s / messages * 1000 if cpu_s is not None and messages else None


def _sharedsub_version() -> str:
    try:
        v = importlib.metadata.version("sharedsub")
    except importlib.metadata.PackageNotFoundError:
        v = "?"
    commit = report._git("-C", os.path.dirname(HERE), "rev-parse", "--short", "HEAD")
    return f"{v} ({commit})" if commit else v


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT, even where a shell started us ignoring it) into KeyboardInterrupt,
    so every ``finally`` stops its broker."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, handler)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s = settings_from(args)
    if s.client == "rhea" and {"publish", "consume"} & set(args.only):
        why = rhea_workloads.available()
        if why is not None:
            print(f"bench: --client rhea: {why}; or use --client proton", file=sys.stderr)
            return 2
    if "many-subs" in args.only and {"artemis", "sharedsub"} & set(args.brokers):
        why = rhea_workloads.available()
        if why is not None:
            print(f"bench: many-subs runs on the rhea client: {why}", file=sys.stderr)
            return 2
    started = datetime.datetime.now(datetime.UTC)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    rec = Recorder(args.out_dir, stamp)
    meta = {
        "started_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(sys.orig_argv),
        "cwd": os.getcwd(),
        "commit": report.describe_commit(os.path.dirname(HERE)),
        "machine": procstat.machine_info(),
        "settings": ", ".join(f"{k}={v}" for k, v in asdict(s).items()),
        "out_path": os.path.relpath(rec.path, os.path.dirname(HERE)),
    }
    rec.emit({"bench": "meta", **meta, "settings": asdict(s), "only": args.only, "brokers": args.brokers})
    t0 = time.perf_counter()
    rc = 0
    with sigterm_as_interrupt():
        try:
            has_plan = bool(planned(args.only, s))
            if "rabbitmq" in args.brokers and has_plan:
                peer = RabbitMQPeer(log=log, keep_state=args.keep_state)
                run_broker(peer, args.only, s, rec, lambda: peer.version)
            if "artemis" in args.brokers:
                if has_plan:
                    artemis = ArtemisPeer(log=log, keep_state=args.keep_state, log_path=rec.side_file("artemis.log"))
                    run_broker(artemis, args.only, s, rec, lambda: artemis.version)
                if "fanout" in args.only:
                    guarded(rec, {"bench": "fanout_latency", "broker": "artemis",
                                  "subscribers": s.fanout_latency_subs},
                            lambda: measure_fanout_latency_artemis(s, rec, args.keep_state))
                if "many-subs" in args.only:
                    for n, r in many_subs_plan(s):
                        guarded(rec, {"bench": "many_subs", "broker": "artemis", "subscribers": n, "run": r},
                                lambda n=n, r=r: measure_many_subs("artemis", n, s, rec, args.keep_state, r))
            if "proton-floor" in args.brokers and {"publish", "consume"} & set(args.only):
                floor = ProtonFloorPeer(log=log, log_path=rec.side_file("proton-floor.log"))
                run_broker(floor, tuple(b for b in args.only if b in ("publish", "consume")), s, rec,
                           lambda: floor.version)
            if "sharedsub" in args.brokers:
                if has_plan:
                    svc = SharedSubService(log=log, log_path=rec.side_file("serve.log"), keep_data=args.keep_state)
                    run_broker(svc, args.only, s, rec, _sharedsub_version)
            for variant, env in VARIANT_ENV.items():
                if variant in args.brokers and has_plan:
                    svc = SharedSubService(log=log, log_path=rec.side_file(f"serve-{variant}.log"),
                                           keep_data=args.keep_state, name=variant, env=env)
                    run_broker(svc, args.only, s, rec, _sharedsub_version)
            if S3_VARIANT in args.brokers and has_plan:
                s3 = SharedSubS3Service(log=log, log_path=rec.side_file(f"serve-{S3_VARIANT}.log"),
                                        server_log_path=rec.side_file("versitygw.log"), keep_data=args.keep_state,
                                        store_delay_ms=s.store_delay_ms)
                run_broker(s3, args.only, s, rec, _sharedsub_version)
            if "sharedsub" in args.brokers:
                if "fanout" in args.only:
                    log(RABBITMQ_NO_SELECTORS)
                    rec.emit({"bench": "fanout_note", "broker": "rabbitmq", "skipped": RABBITMQ_NO_SELECTORS})
                    for n in s.fanout_subs:
                        guarded(rec, {"bench": "fanout_throughput", "broker": "sharedsub", "subscribers": n},
                                lambda n=n: measure_fanout_throughput(n, s, rec, args.keep_state))
                    guarded(rec, {"bench": "fanout_latency", "broker": "sharedsub",
                                  "subscribers": s.fanout_latency_subs},
                            lambda: measure_fanout_latency(s, rec, args.keep_state))
                if "many-subs" in args.only:
                    if "rabbitmq" in args.brokers:
                        log(RABBITMQ_NO_MANY_SUBS)
                        rec.emit({"bench": "many_subs_note", "broker": "rabbitmq", "skipped": RABBITMQ_NO_MANY_SUBS})
                    for n, r in many_subs_plan(s):
                        guarded(rec, {"bench": "many_subs", "broker": "sharedsub", "subscribers": n, "run": r},
                                lambda n=n, r=r: measure_many_subs("sharedsub", n, s, rec, args.keep_state, r))
                if "amplification" in args.only:
                    for n in s.amp_subscribers:
                        guarded(rec, {"bench": "amplification", "broker": "sharedsub", "subscribers": n},
                                lambda n=n: measure_amplification(n, s, rec, args.keep_state))
        except KeyboardInterrupt:
            log("interrupted: brokers stopped; summarising what was measured")
            rec.emit({"bench": "interrupted"})
            rc = 130
    meta["wall_s"] = time.perf_counter() - t0
    table = report.summary_table(rec.lines)
    print("\n" + table)
    for note in report.notes(rec.lines):
        print(f"- {note}")
    print(f"\nraw lines: {rec.path}; wall {meta['wall_s']:.0f} s")
    if args.write_results and rc == 0:
        path = os.path.join(HERE, "RESULTS.md")
        report.write_results(path, rec.lines, meta)
        log(f"appended to {path}")
    elif args.write_results:
        log("interrupted run: RESULTS.md left unchanged")
    return rc


if __name__ == "__main__":
    sys.exit(main())
