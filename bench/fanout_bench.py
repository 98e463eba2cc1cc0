"""Fan-out with JMS selectors (sharedsub only: RabbitMQ has no JMS selectors to compare with).

* :func:`routing_throughput`: one topic pre-loaded with M messages straight into Delta (as
  tests/builders.py does, no AMQP front end), N catalog subscriptions with distinct selectors
  and ``start_seq`` 0, then the fan-out job once with available-now (bench/fanout_job.py in its
  own process); published messages routed per second = M / (start of the first micro-batch
  that carries topic rows → end of the last one); Spark start-up and the query's first,
  row-less batch (the topic's creation commit) are excluded, the latter reported separately.
* :class:`SelectorSubscribers`: N AMQP receivers, each with a distinct selector, on one
  connection in one proton Container in a background thread (the latency measurement runs its
  own publisher and subscriber next to them, see bench/run.py ``fanout_latency_run``). Plain
  links against sharedsub; against Artemis (bench/artemis_peer.py) each is the one consumer of a
  JMS global shared durable subscription with that selector (the routing RabbitMQ cannot do).

Selector k (k = 0..N-1): ``region = 'r<k%8>' AND priority_prop > <k%10> AND bucket <> <k>``.
Message i carries region ``r<i%8>`` (string), priority_prop ``(i//8)%10`` (long) and bucket
``i%1000`` (long), so selector k matches about 1/8 · (9-k%10)/10 of the messages, each a
different subset (``bucket <> k`` makes every selector text and subset distinct).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import procstat
import proton
import pyarrow as pa
import workloads
from proton.handlers import MessagingHandler
from proton.reactor import Container

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sharedsub.core import layout  # noqa: E402
from sharedsub.core.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState  # noqa: E402
from sharedsub.storage import catalog, schemas  # noqa: E402
from sharedsub.storage.delta.appender import DeltaAppender  # noqa: E402
from sharedsub.storage.topics import create_topic  # noqa: E402

TOPIC = "bench-fanout"
REGIONS = 8
PRIORITIES = 10
BUCKETS = 1000
JMS_SELECTOR = proton.ulong(0x468C00000004)


def selector(k: int) -> str:
    """The k-th distinct selector."""
    return f"region = 'r{k % REGIONS}' AND priority_prop > {k % PRIORITIES} AND bucket <> {k}"


def message_props(i: int) -> tuple[str, int, int]:
    """(region, priority_prop, bucket) of message i, as the selectors see them."""
    return f"r{i % REGIONS}", (i // REGIONS) % PRIORITIES, i % BUCKETS


def expected_matches(m: int, n: int) -> int:
    """How many (message, subscription) pairs match, over messages 0..m-1 and selectors 0..n-1."""
    by_rp: Counter[tuple[str, int]] = Counter()
    by_rpb: Counter[tuple[str, int, int]] = Counter()
    for i in range(m):
        r, p, b = message_props(i)
        by_rp[(r, p)] += 1
        by_rpb[(r, p, b)] += 1
    total = 0
    for k in range(n):
        r = f"r{k % REGIONS}"
        for p in range(k % PRIORITIES + 1, PRIORITIES):
            total += by_rp[(r, p)] - by_rpb[(r, p, k)]
    return total


def _prop(value: int | str) -> dict[str, Any]:
    if isinstance(value, int):
        return {"type": "long", "long": value, "double": None, "string": None, "bool": None}
    return {"type": "string", "long": None, "double": None, "string": value, "bool": None}


def preload(root: str, m: int, size: int, per_commit: int) -> int:
    """Create the topic and append messages 0..m-1 (random ``size``-byte bodies) in commits of
    ``per_commit``; return the number of topic commits."""
    create_topic(root, TOPIC)
    path = layout.topic_table(root, TOPIC)
    appender = DeltaAppender(path, schemas.TOPIC)
    t0 = dt.datetime.now(dt.UTC)
    commits = 0
    for first in range(0, m, per_commit):
        rows = []
        for i in range(first, min(m, first + per_commit)):
            region, prio, bucket = message_props(i)
            rows.append({
                "seq": i, "published_at": t0, "publisher": "bench-preload", "routing_key": None,
                "partition": i % 4, "size": size, "durable": True, "priority": 4, "ttl": None,
                "message_id": f"ID:bench-{i}", "subject": None,
                "application_properties": [("region", _prop(region)), ("priority_prop", _prop(prio)),
                                           ("bucket", _prop(bucket))],
                "message": os.urandom(size),
            })
        appender.append(pa.Table.from_pylist(rows, schema=schemas.TOPIC))
        commits += 1
    return commits


def register_subscriptions(root: str, n: int) -> None:
    """Commit n active shared durable subscriptions (selector k, start_seq 0) in one catalog commit."""
    now = dt.datetime.now(dt.UTC)
    records = [
        SubscriptionRecord(
            identity=SubscriptionKey("bench-container", f"sel{k}", True, True), generation=1,
            state=SubscriptionState.ACTIVE, topic=TOPIC, binding="#", selector=selector(k), no_local=False,
            expiry_policy=ExpiryPolicy.NEVER, start_seq=0, source="{}", created_at=now, updated_at=now,
            revision=1 + k,
        )
        for k in range(n)
    ]
    catalog.append_records(catalog.catalog_appender(root), records)


class TreeCpu:
    """Samples the CPU seconds of a process tree (the fan-out job: its Python, the driver's JVM,
    executor JVMs, their Python workers) every ``interval_s`` in a thread.

    Each process counts with its own user + system time as last seen (keyed by pid and start
    time, so a reused pid is another process); a process that exits between two samples loses
    what it used since the last one (at most ``interval_s`` of CPU per process: a lower bound).
    :meth:`at` gives the tree's total at a wall-clock time (the last sample at or before it), so
    a window of the run (the routing, without Spark's start) can be taken out of the total.
    """

    def __init__(self, root: int, interval_s: float = 0.25) -> None:
        self.root, self.interval_s = root, interval_s
        self.seen: dict[tuple[int, str], float] = {}
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-cpu", daemon=True)

    def start(self) -> TreeCpu:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                return

    def sample(self) -> None:
        for pid in procstat.tree_pids(self.root):
            fields = procstat._stat_fields(pid)  # noqa: SLF001 (the bench's own /proc reader)
            if fields is None:
                continue
            # utime, stime (fields 14, 15) and starttime (field 22), 0-based after the name.
            self.seen[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / procstat._CLK_TCK  # noqa: SLF001
        self.samples.append((time.time(), sum(self.seen.values())))

    def total(self) -> float:
        return self.samples[-1][1] if self.samples else 0.0

    def at(self, wall: float) -> float:
        before = [cpu for t, cpu in self.samples if t <= wall]
        return before[-1] if before else 0.0


def run_fanout_job(root: str, log_path: str, timeout_s: float, *, env: dict[str, str] | None = None,
                   job_args: list[str] | None = None) -> dict[str, Any]:
    """Run bench/fanout_job.py on ``root`` (own session, killed as a group on timeout); its stats.

    ``env``: variables added to the job's environment (e.g. ``SHAREDSUB_FANOUT_ROUTING``);
    ``job_args``: more arguments for it (``--conf K=V``, ``--warmup``). The stats gain
    ``cpu``: the job's process tree's CPU seconds (:class:`TreeCpu`) over the whole run and over
    the routing (first to last micro-batch with rows), and the ``RUSAGE_CHILDREN`` delta of this
    process (the job and the descendants reaped by a waiting parent: JVMs and workers that were
    re-parented are missing from it, so it is a cross-check, not the figure).
    """
    out = os.path.join(root, "_bench_fanout_stats.json")
    child_env = {**os.environ, **(env or {})}
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log_path, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "fanout_job.py"), "--data-dir", root, "--out", out, *(job_args or [])],
            stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True, cwd=ROOT, env=child_env,
        )
    cpu = TreeCpu(proc.pid).start()
    t0 = time.perf_counter()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    finally:
        cpu.stop()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # JVM and Python workers, whatever is left
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait(timeout=10)
    wall = time.perf_counter() - t0
    if timed_out or proc.returncode != 0 or not os.path.exists(out):
        with open(log_path, encoding="utf-8", errors="replace") as f:
            tail = f.read()[-1500:]
        what = f"timed out after {timeout_s:.0f} s" if timed_out else f"exited with rc {proc.returncode}"
        raise RuntimeError(f"fan-out job {what}; log {log_path}: {tail!r}")
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, encoding="utf-8") as f:
        stats = json.load(f)
    stats["process_wall_s"] = wall
    stats["cpu"] = {
        "tree_total_s": cpu.total(),
        "rusage_children_s": (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime),
        "processes_seen": len(cpu.seen),
    }
    stats["tree_cpu"] = cpu
    return stats


def routing_throughput(n: int, m: int, size: int, per_commit: int, timeout_s: float, log_path: str,
                       log: Callable[[str], None], keep: bool = False, *, env: dict[str, str] | None = None,
                       job_args: list[str] | None = None, template: str | None = None,
                       skip_first: bool = False) -> dict[str, Any]:
    """Pre-load, register ``n`` selector subscriptions, route once; return the figures.

    ``template``: a data dir that :func:`preload` filled with the same ``m``, ``size`` and
    ``per_commit``, copied instead of pre-loading again (runs of several routing modes over one
    topic). ``env`` and ``job_args``: as :func:`run_fanout_job`.
    """
    root = tempfile.mkdtemp(prefix="sharedsub-bench-fanout-")
    try:
        t0 = time.perf_counter()
        if template is not None:
            shutil.copytree(template, root, dirs_exist_ok=True)
            topic_commits = -(-m // per_commit)
        else:
            topic_commits = preload(root, m, size, per_commit)
        register_subscriptions(root, n)
        setup_s = time.perf_counter() - t0
        log(f"fanout N={n}: {m} messages in {topic_commits} topic commits pre-loaded in {setup_s:.1f} s; routing")
        stats = run_fanout_job(root, log_path, timeout_s, env=env, job_args=job_args)
        # A new query's first micro-batch covers only the topic's creation commit (the source's
        # first_batch_max_commits, so that serve reports ready quickly): it routes nothing and
        # is mostly Python-worker warm-up. Routing time runs from the first batch that carries
        # topic rows; the figure including that first empty batch is reported too.
        every = [b for b in stats["batches"] if b["routes"]]
        batches = every
        while batches and batches[0]["routed_rows"] == 0 and len(batches) > 1:
            batches = batches[1:]
        first_rows_batch_s = None
        if skip_first and len(batches) > 1:
            # The first batch with rows still pays one-time costs (on the executors: Python
            # workers of the routing job, imports, the plan's compilation): reported on its own.
            first_rows_batch_s = batches[0]["end"] - batches[0]["start"]
            batches = batches[1:]
        timed_m = sum(b.get("rows_in", 0) for b in batches) if skip_first else m
        cpu: TreeCpu = stats["tree_cpu"]
        if batches:
            stats["cpu"]["tree_routing_s"] = cpu.at(batches[-1]["end"] + cpu.interval_s) - cpu.at(batches[0]["start"])
        expected = expected_matches(m, n)
        out: dict[str, Any] = {
            "messages": m, "size": size, "topic_commits": topic_commits, "setup_s": round(setup_s, 2),
            "max_commits_per_batch": stats["max_commits_per_batch"], "spark_master": stats["spark_master"],
            "spark_session_s": round(stats["session_s"], 2), "process_wall_s": round(stats["process_wall_s"], 2),
            "micro_batches": len(every),
            "micro_batches_with_rows": sum(1 for b in every if b["routed_rows"]),
            "expected_routed_rows": expected,
            "expected_avg_selectivity": expected / (m * n) if m and n else None,
            "routing": stats.get("routing"), "executors": stats.get("executors"), "placed": stats.get("placed"),
            "warmup_s": stats.get("warmup_s"), "cpu": stats["cpu"],
        }
        if batches:
            route_s = batches[-1]["end"] - batches[0]["start"]
            routed = sum(b["routed_rows"] for b in batches)
            out.update({
                "routing_s": route_s,
                "timed_messages": timed_m, "first_rows_batch_s": first_rows_batch_s,
                "msgs_routed_per_s": timed_m / route_s if route_s > 0 else None,
                "routed_rows": routed,
                "rows_committed": sum(b["rows_committed"] for b in batches),
                "subscription_table_commits": sum(b["table_commits"] for b in batches),
                "rows_committed_per_s": sum(b["rows_committed"] for b in batches) / route_s if route_s > 0 else None,
                "avg_selectivity": routed / (timed_m * n) if timed_m else None,
                "batch_s": [round(b["end"] - b["start"], 2) for b in every],
                "batch_routed_rows": [b["routed_rows"] for b in every],
                "routing_s_from_first_batch": every[-1]["end"] - every[0]["start"],
                "msgs_routed_per_s_from_first_batch": m / (every[-1]["end"] - every[0]["start"]),
                "routed_as_expected": sum(b["routed_rows"] for b in every) == expected,
                "cpu_s_per_msg": stats["cpu"]["tree_routing_s"] / timed_m if timed_m else None,
                # rows × routes and seconds of each batch with rows (the placement rule's "work")
                "batch_work": [b["rows_in"] * b["routes"] for b in batches] if all("rows_in" in b for b in batches) else None,
                "data_dir_bytes_after": procstat.dir_bytes(root)["apparent_bytes"],
            })
        return out
    finally:
        if keep:
            log(f"fanout data kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


class SelectorSubscribers(MessagingHandler):
    """``n`` receivers with selectors 0..n-1 on one connection; run with :meth:`start` / :meth:`stop`.

    Each link has its own name, so each is its own subscription (created at attach, receiving
    what is published after it). With ``shared_durable`` each link is a JMS 2.0 global shared
    durable consumer instead (link ``bench-sel<k>|global``, source as
    ``workloads.shared_durable_source`` sets it, plus the selector), so each subscription is a
    durable shared one, created at attach. Messages are accepted and counted, nothing else.
    """

    def __init__(self, url: str, address: str, n: int, *, prefetch: int = 100, shared_durable: bool = False) -> None:
        super().__init__(prefetch=prefetch, auto_accept=True, auto_settle=True)
        self.url, self.address, self.n = url, address, n
        self.shared_durable = shared_durable
        self.opened = 0
        self.received = 0
        self.errors: list[str] = []
        self.all_open = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._container: Container | None = None

    def on_start(self, event: Any) -> None:
        self._container = event.container
        self._conn = event.container.connect(self.url, reconnect=False)
        for k in range(self.n):
            if self.shared_durable:
                name = workloads.shared_durable_link_name(f"bench-sel{k}")
                options = [_SelectorFilter(selector(k)), workloads.SourceSetup(workloads.shared_durable_source)]
            else:
                name, options = f"bench-selector-{k}", [_SelectorFilter(selector(k))]
            event.container.create_receiver(self._conn, self.address, name=name, options=options)
        event.container.schedule(0.2, self)

    def on_timer_task(self, event: Any) -> None:
        if self._stop.is_set():
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            event.container.schedule(5.0, _Stopper(event.container))
            return
        event.container.schedule(0.2, self)

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            self.opened += 1
            if self.opened == self.n:
                self.all_open.set()

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.errors.append(f"link {event.link.name}: {cond.name} {cond.description}" if cond else "link closed")

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.errors.append(f"transport: {cond.name if cond else ''}")

    def on_connection_closed(self, event: Any) -> None:
        if self._container is not None:
            self._container.stop()

    def on_message(self, event: Any) -> None:
        self.received += 1

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: Container(self).run(), name="selector-subs", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self.errors.append("background container did not stop in time")


class _Stopper(proton.reactor.Handler):
    def __init__(self, container: Container) -> None:
        super().__init__()
        self._c = container

    def on_timer_task(self, event: Any) -> None:
        self._c.stop()


class _SelectorFilter(proton.reactor.LinkOption):
    """Source filter ``jms-selector`` as the Qpid JMS client sends it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def apply(self, link: Any) -> None:
        link.source.filter.put_object({proton.symbol("jms-selector"): proton.Described(JMS_SELECTOR, self.text)})

    def test(self, link: Any) -> bool:
        return link.is_receiver


def message_properties(i: int) -> dict[str, Any]:
    """Application properties of published message i (for the AMQP latency workload)."""
    region, prio, bucket = message_props(i)
    return {"region": region, "priority_prop": prio, "bucket": bucket}
