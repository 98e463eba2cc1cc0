"""One front end against two on one ``s3://`` data dir, and the time a member's death costs (issue 30).

    .venv/bin/python bench/cluster_compare.py [--count 20000] [--warmup 2000] [--window 1000]
        [--consume-count 20000] [--kills 5] [--only publish,consume,kill] [--out FILE.jsonl]

Everything runs on this host against one local S3 server (versitygw, tests/s3_server.py), each
scenario on a bucket of its own:

1. **Publish, one member**: ``sharedsub serve`` (``[cluster] max_members = 1``); one publisher
   (bench/workloads.py ``publish_throughput``: durable 1 KB messages, ``--window`` unsettled)
   sends ``--warmup`` then ``--count`` messages; accepted msg/s over the measured part, and the
   CPU seconds of serve's whole process tree (its fan-out included) per 1,000 messages.
2. **Publish, two members**: ``serve`` (slot 0) and ``frontend`` (slot 1, ``max_members = 2``);
   one publisher on each at once, each sending ``--count / 2``: the sum of their rates over the
   same wall time, and both trees' CPU per 1,000 messages. On a 2-core host the second front end
   competes with the first (and with the fan-out and the S3 server) for the same cores, so the
   ratio says what the coordination costs here, not what a second machine would add.
3. **Consume, one member and two**: a global shared durable subscription with a backlog of
   ``--consume-count`` 1 KB messages (with two members, half published through each: one topic
   partition each), drained by one consumer per member (bench/workloads.py ``consume_backlog``,
   prefetch 100, each delivery accepted). Before the drain, a consumer without credit is attached
   on each member and the run waits until each member dispatches its own partition, so what is
   timed is the steady state, not a hand-over. Accepted msg/s from the first delivery to the
   last, and the trees' CPU per 1,000 messages over the drain.
4. **kill -9 to the first redelivery**, ``--kills`` times: a fresh ``frontend`` joins ``serve``
   (slot 1); a global shared durable subscription has a consumer on each, the frontend's holds
   its partition's messages unsettled; the frontend is killed; the time until serve's consumer
   receives the first of those messages again (marked redelivered). p50 and max. On this host the
   dead process is seen at once (its pid); on another host add the lease's 15 s.
5. **Model** (printed, not measured): N front ends publish at ``Σ min(r1_commit × m, CPU_k)``
   (docs/design.md §8 and ../shared/reference/scale-out.md Q7): each partition is a table with
   one writer, so the members do not share a commit rate; what this host shows is the per-member
   CPU per message, which a machine of its own gives each member.

One JSON line per measurement goes to ``--out`` (default bench/out/cluster-compare-<time>.jsonl)
and a summary to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import procstat  # noqa: E402
import workloads  # noqa: E402
from proton import Message  # noqa: E402

from sharedsub.core import layout  # noqa: E402
from sharedsub.storage.catalog import load_catalog  # noqa: E402
from sharedsub.storage.delta.table_reads import read_table  # noqa: E402
from sharedsub.storage.objects import locations  # noqa: E402
from sharedsub.storage.topics import create_topic  # noqa: E402
from tests.amqp_peer import Subscriber, jms_shared_durable, publish, uid, wait_for  # noqa: E402
from tests.members import MEMBERS, wait_for_owner  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402
from tests.service import ServeProcess  # noqa: E402


def _tree_cpu(proc: ServeProcess) -> float:
    assert proc.proc is not None
    return procstat.tree_cpu_seconds(proc.proc.pid)


def publish_one(server: S3Server, args: argparse.Namespace) -> dict[str, Any]:
    """Scenario 1."""
    data = server.url("one")
    locations.register(data, server.env())
    serve = ServeProcess(data, env={**server.env(), "SHAREDSUB_CLUSTER_MAX_MEMBERS": "1"}).start()
    try:
        topic = uid("t")
        create_topic(data, topic)
        cpu0 = _tree_cpu(serve)
        out = workloads.publish_throughput(serve.url, topic, warmup=args.warmup, count=args.count, window=args.window)
        cpu = _tree_cpu(serve) - cpu0
    finally:
        serve.stop()
    total = args.warmup + args.count
    return {"scenario": "publish-1", "msgs_per_s": out["msgs_per_s"], "cpu_s_per_1000": 1000 * cpu / total, **_errors(out)}


def publish_two(server: S3Server, args: argparse.Namespace) -> dict[str, Any]:
    """Scenario 2."""
    data = server.url("two")
    locations.register(data, server.env())
    env = {**server.env(), **MEMBERS}
    serve = ServeProcess(data, env=env).start()
    front = ServeProcess(data, command="frontend", env=env).start()
    try:
        topic = uid("t")
        create_topic(data, topic)
        results: list[dict[str, Any]] = [{}, {}]
        cpu0 = _tree_cpu(serve) + _tree_cpu(front)
        t0 = time.perf_counter()

        def run(i: int, url: str) -> None:
            results[i] = workloads.publish_throughput(
                url, topic, warmup=args.warmup // 2, count=args.count // 2, window=args.window
            )

        threads = [threading.Thread(target=run, args=(i, p.url)) for i, p in enumerate((serve, front))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        cpu = _tree_cpu(serve) + _tree_cpu(front) - cpu0
    finally:
        front.stop()
        serve.stop()
    total = args.warmup + args.count
    rates = [r.get("msgs_per_s") or 0.0 for r in results]
    return {
        "scenario": "publish-2",
        "msgs_per_s": sum(rates),
        "per_member_msgs_per_s": rates,
        "wall_msgs_per_s": total / wall,
        "cpu_s_per_1000": 1000 * cpu / total,
        **_errors(results[0]),
    }


def consume(server: S3Server, args: argparse.Namespace, members: int) -> dict[str, Any]:
    """Scenario 3 with ``members`` front ends."""
    data = server.url(f"consume-{members}")
    locations.register(data, server.env())
    env = {**server.env(), **MEMBERS} if members > 1 else {**server.env(), "SHAREDSUB_CLUSTER_MAX_MEMBERS": "1"}
    procs = [ServeProcess(data, env=env).start()]
    holders: list[Subscriber] = []
    try:
        if members > 1:
            procs.append(ServeProcess(data, command="frontend", env=env).start())
        topic = uid("t")
        create_topic(data, topic)
        link = workloads.shared_durable_link_name(topic)  # the subscription is named as its topic
        workloads.create_subscription(procs[0].url, topic, link, workloads.shared_durable_source)
        per = args.consume_count // members
        for i, proc in enumerate(procs):
            load = workloads.publish_throughput(
                proc.url, topic, warmup=0, count=per, window=args.window, first_seq=i * per
            )
            if load["accepted"] != per:
                raise RuntimeError(f"pre-load through member {i}: {load['accepted']} of {per} accepted")
        key = layout.subscription_key("global", topic, shared=True, durable=True)
        table = layout.join(data, load_catalog(data)[key].table)
        wait_for(lambda: _rows(table) >= per * members, 300, "the backlog to be routed")
        for i, proc in enumerate(procs if members > 1 else []):  # each member dispatches its own partition
            holder = Subscriber(proc.url, topic, credit=0, **jms_shared_durable(topic, is_global=True, ordinal=2 + i))
            holders.append(holder)
            holder.start()
            if not holder.attached.wait(60):
                raise RuntimeError(f"no attach: {holder.error}")
        for i in range(members if members > 1 else 0):
            wait_for_owner(data, topic, i, i)
        cpu0 = sum(_tree_cpu(p) for p in procs)
        res = workloads.consume_backlog(
            procs[0].url, topic, consumers=members, count=per * members, link_name=link,
            configure=workloads.shared_durable_source, urls=[p.url for p in procs],
        )
        cpu = sum(_tree_cpu(p) for p in procs) - cpu0
        if res["missing"]:  # keep what the members said, to see why
            for i, proc in enumerate(procs):
                with open(f"{args.out_path}.consume-{members}.member{i}.log", "w", encoding="utf-8") as fh:
                    fh.write("\n".join(proc.stderr_lines))
    finally:
        for holder in holders:
            holder.stop()
        for proc in reversed(procs):
            proc.stop()
    return {
        "scenario": f"consume-{members}",
        "msgs_per_s": res["msgs_per_s"],
        "per_consumer_accepted": res["per_consumer_first_accepted"],
        "cpu_s_per_1000": 1000 * cpu / max(1, res["distinct_accepted"]),
        # The one client process drains every member: its CPU share of the drain says whether it
        # was the limit (1.0 = a whole core).
        "client_cpu_share": res["client_cpu_s"] / res["measured_s"] if res.get("client_cpu_s") and res["measured_s"] else None,
        "missing": res["missing"],
        "missing_range": res.get("missing_range"),
        "duplicates": res["duplicates"],
        "redelivered": res["redelivered"],
        "errors": res.get("errors"),
    }


def _rows(table: str) -> int:
    data = read_table(table, ["seq"])
    return data.num_rows if data is not None else 0


def _errors(out: dict[str, Any]) -> dict[str, Any]:
    return {"timed_out": out.get("timed_out"), "not_accepted": out.get("not_accepted"), "errors": out.get("errors")}


def kill_to_redelivery(server: S3Server, args: argparse.Namespace) -> dict[str, Any]:
    """Scenario 3."""
    data = server.url("kill")
    locations.register(data, server.env())
    env = {**server.env(), **MEMBERS}
    serve = ServeProcess(data, env=env).start()
    try:
        times = [_one_kill(serve, data, env) for _ in range(args.kills)]
    finally:
        serve.stop()
    return {
        "scenario": "kill-to-redelivery",
        "kills": len(times),
        "p50_s": statistics.median(times) if times else None,
        "max_s": max(times) if times else None,
        "times_s": times,
    }


def _one_kill(serve: ServeProcess, data: str, env: dict[str, str]) -> float:
    """One frontend joined, loaded, killed: seconds from its kill to the survivor's first redelivery."""
    front = ServeProcess(data, command="frontend", env=env).start()
    topic, name = uid("t"), uid("sub")
    create_topic(data, topic)
    create_topic(data, topic, 1)  # the frontend's partition, as its first publish makes it
    survivor = Subscriber(serve.url, topic, **jms_shared_durable(name, is_global=True))
    doomed = Subscriber(front.url, topic, settle="none", **jms_shared_durable(name, is_global=True, ordinal=2))
    try:
        for sub in (survivor, doomed):
            sub.start()
            if not sub.attached.wait(60):
                raise RuntimeError(f"no attach: {sub.error}")
        wait_for_owner(data, name, 1, 1)  # the partition handed over to the frontend's consumer
        publish(front.url, topic, [Message(body=f"m{i}") for i in range(20)])
        wait_for(lambda: len(doomed.received) >= 20, 120, "the frontend's consumer to hold its messages")
        before = len(survivor.received)
        t0 = time.perf_counter()
        front.kill()
        wait_for(lambda: len(survivor.received) > before, 120, "the first redelivery at the survivor")
        return time.perf_counter() - t0
    finally:
        for sub in (survivor, doomed):
            sub.stop()
        front.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--consume-count", type=int, default=20000)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--only", default="publish,consume,kill", help="comma-separated: publish, consume, kill")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    out_path = args.out or os.path.join(HERE, "out", f"cluster-compare-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    args.out_path = out_path
    root = Path(tempfile.mkdtemp(prefix="sharedsub-cluster-bench-"))
    server = S3Server(root / "buckets", root / "versitygw.log").start()
    os.environ.update(server.env())  # this process reads the bucket too (who dispatches what, the backlog)
    only = set(args.only.split(","))
    scenarios: list[Callable[[S3Server, argparse.Namespace], dict[str, Any]]] = []
    if "publish" in only:
        scenarios += [publish_one, publish_two]
    if "consume" in only:
        scenarios += [lambda srv, a: consume(srv, a, 1), lambda srv, a: consume(srv, a, 2)]
    if "kill" in only:
        scenarios.append(kill_to_redelivery)
    rows: dict[str, dict[str, Any]] = {}
    try:
        for scenario in scenarios:
            row = {**scenario(server, args), "machine": procstat.machine_info()}
            rows[row["scenario"]] = row
            with open(out_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            print(json.dumps({k: v for k, v in row.items() if k != "machine"}), flush=True)
    finally:
        server.stop()
    for what in ("publish", "consume"):
        one, two = rows.get(f"{what}-1"), rows.get(f"{what}-2")
        if one and two and one["msgs_per_s"] and two["msgs_per_s"]:
            print(
                f"two members ÷ one: {what} {two['msgs_per_s'] / one['msgs_per_s']:.2f}×, "
                f"CPU per message {two['cpu_s_per_1000'] / one['cpu_s_per_1000']:.2f}× (one 2-core host)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
