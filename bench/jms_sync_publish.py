"""Synchronous persistent sends with the Qpid JMS client: sharedsub beside Apache ActiveMQ Artemis.

    .venv/bin/python bench/jms_sync_publish.py [--count 2000] [--warmup 200] [--runs 2]
        [--brokers artemis,sharedsub,sharedsub-heldsync]

A JMS application that sends a persistent message outside a transaction with the client's
defaults waits in ``send()`` until the broker accepted it (bench/jms/SyncSend.java): the
publisher's rate is one over the broker's publish→accepted time for a lone message. Each broker
runs alone on a fresh state; the sends go to a topic with one durable subscription, so every
message is stored (Artemis: a global shared durable subscription, as bench/run.py makes it;
sharedsub: the topic table, which stores every message). ``sharedsub-heldsync`` is sharedsub
with ``[publish] sync_send_gap = 0``: every publish waits for the commit interval, as before
sharedsub.core.publish.commit_pace. Runs alternate between the brokers so that a busy machine
slows each alike.

The client and its dependencies come from tests/jms/pom.xml (``mvn dependency:build-classpath``,
offline when the local repository has them); the Java source is run by the JDK's source launcher.
Prints a table (median msg/s and ms per send) and writes one JSON line per run to
bench/out/jms-sync-<UTC>.jsonl.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import procstat  # noqa: E402 (bench/ is not a package)
from artemis_peer import ArtemisPeer  # noqa: E402
from sharedsub_service import SharedSubService, topic_name  # noqa: E402

SOURCE = os.path.join(HERE, "jms", "SyncSend.java")
POM = os.path.join(ROOT, "tests", "jms", "pom.xml")
VARIANTS = {"sharedsub": {}, "sharedsub-heldsync": {"SHAREDSUB_PUBLISH_SYNC_SEND_GAP": "0"}}


def log(line: str) -> None:
    print(f"[jms-sync {datetime.datetime.now(datetime.UTC):%H:%M:%S}] {line}", file=sys.stderr, flush=True)


def client_classpath() -> str:
    """The Qpid JMS client's classpath, from the JMS tier's pom (offline first)."""
    out = os.path.join(tempfile.mkdtemp(prefix="jms-cp-"), "cp.txt")
    base = ["mvn", "-q", "-B", "-f", POM, "dependency:build-classpath", f"-Dmdep.outputFile={out}"]
    for extra in (["-o"], []):
        if subprocess.run(base + extra, capture_output=True, text=True, timeout=600).returncode == 0:
            with open(out, encoding="utf-8") as fh:
                return fh.read().strip()
    raise RuntimeError(f"mvn could not resolve the Qpid JMS client from {POM}")


def send(classpath: str, url: str, topic: str, warmup: int, count: int) -> dict[str, float]:
    """What the client printed for ``count`` synchronous sends (after ``warmup``): ``seconds``
    in all, and the time one send took (``p50_ms``, ``p90_ms``, ``p99_ms``, ``max_ms``)."""
    proc = subprocess.run(
        ["java", "-cp", classpath, SOURCE, url, topic, str(warmup), str(count)],
        capture_output=True, text=True, timeout=max(600, count),
    )
    if proc.returncode != 0:
        raise RuntimeError(f"SyncSend failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    fields = dict(part.split("=", 1) for part in proc.stdout.split() if "=" in part)
    return {k: float(v) for k, v in fields.items() if k != "sent"}


def run_sharedsub(
    name: str, env: dict[str, str], label: str, measure: Callable[[str, str], dict[str, float]]
) -> dict[str, float]:
    """One run against a fresh ``sharedsub serve`` (variant ``name``)."""
    log_path = os.path.join(tempfile.gettempdir(), f"jms-sync-{name}.log")
    with SharedSubService(log=log, log_path=log_path, name=name, env=env) as service:
        service.create_topics([topic_name(label)])
        service.start()
        return measure(service.url, service.route(label, subscribe=False).publish_address)


def run_artemis(label: str, measure: Callable[[str, str], dict[str, float]]) -> dict[str, float]:
    """One run against a fresh Artemis instance."""
    log_path = os.path.join(tempfile.gettempdir(), "jms-sync-artemis.log")
    with ArtemisPeer(log=log, log_path=log_path) as peer:
        peer.start()
        return measure(peer.url, peer.route(label, subscribe=False).publish_address)


def main(argv: list[str] | None = None) -> int:
    """Measure every broker ``--runs`` times, alternating; print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=2000, help="measured sends per run (default 2000)")
    p.add_argument("--warmup", type=int, default=200, help="sends before the measured ones (default 200)")
    p.add_argument("--runs", type=int, default=2, help="runs per broker (default 2)")
    p.add_argument("--brokers", default="artemis,sharedsub,sharedsub-heldsync")
    args = p.parse_args(argv)
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = [b for b in brokers if b != "artemis" and b not in VARIANTS]
    if unknown:
        p.error(f"unknown broker(s) {unknown}: artemis, {', '.join(VARIANTS)}")
    log("resolving the Qpid JMS client's classpath with mvn")
    classpath = client_classpath()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_path = os.path.join(HERE, "out", f"jms-sync-{stamp}.jsonl")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    rates: dict[str, list[float]] = {b: [] for b in brokers}
    with open(out_path, "w", encoding="utf-8") as out:
        for run in range(1, args.runs + 1):
            for broker in brokers:
                label = f"jms-sync-r{run}"

                def measure(url: str, address: str) -> dict[str, float]:
                    return send(classpath, url, address, args.warmup, args.count)

                log(f"{broker} run {run}: {args.warmup} + {args.count} synchronous persistent sends")
                got = run_artemis(label, measure) if broker == "artemis" else run_sharedsub(
                    broker, VARIANTS[broker], label, measure)
                seconds = got["seconds"]
                per_send = {k: v for k, v in got.items() if k.endswith("_ms")}  # p50_ms, ... max_ms
                rate = args.count / seconds
                rates[broker].append(rate)
                line: dict[str, Any] = {"bench": "jms_sync_publish", "broker": broker, "run": run, "count": args.count,
                                        "warmup": args.warmup, "seconds": seconds, "msgs_per_s": rate,
                                        "ms_per_send": 1000 * seconds / args.count,
                                        **per_send, "machine": procstat.machine_info()}
                out.write(json.dumps(line) + "\n")
                spread = ", ".join(f"{k.removesuffix('_ms')} {v:.2f}" for k, v in per_send.items())
                log(f"{broker} run {run}: {rate:,.0f} msg/s ({1000 * seconds / args.count:.2f} ms per send; ms {spread})")
    print("| broker | synchronous persistent sends, Qpid JMS, median (msg/s) | ms per send | runs |")
    print("| --- | ---: | ---: | --- |")
    for broker, values in rates.items():
        med = statistics.median(values)
        print(f"| {broker} | {med:,.0f} | {1000 / med:.2f} | {', '.join(f'{v:,.0f}' for v in values)} |")
    print(f"\nraw lines: {os.path.relpath(out_path, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
