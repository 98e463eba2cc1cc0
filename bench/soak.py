"""Soak: publish and consume at a steady rate for minutes; is the brokers' memory flat?

    .venv/bin/python bench/soak.py [--duration 600] [--warmup 120] [--rate 1000]
                                   [--brokers rabbitmq,sharedsub] [--sample 10] [--serve-env K=V ...]

For each broker in turn (never both at once), with the same python-qpid-proton client code as
bench/run.py's latency measurement: one publisher sends 1 KB durable messages at ``--rate``
msg/s and one subscriber accepts them (sharedsub: a durable subscription fed by the fan-out;
RabbitMQ: a durable queue bound to amq.topic), for ``--warmup`` + ``--duration`` seconds. Every
``--sample`` seconds the resident memory of the broker is read from /proc: sharedsub's front
end (the ``serve`` process alone, where the message path's per-message state lives) and its
whole tree (the Spark JVM and Python workers included), RabbitMQ's tree. For sharedsub the
``sharedsub_delivery_state_seqs`` gauge (seqs the front end holds per subscription to never
send a settled row again) is read from /metrics too.

Reported per broker, over the samples after the warm-up only: memory at the first and last
sample, growth, and the least-squares slope in MiB per minute (flat ≈ 0; a leak shows as a
steady positive slope), plus the messages sent and received. One JSON line per sample and per
summary goes to bench/out/soak-<UTC>.jsonl; a markdown table is printed at the end.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
import threading
import time
import urllib.request
from typing import Any

import procstat
import report
import workloads
from rabbitmq_peer import RabbitMQPeer
from sharedsub_service import SharedSubService

HERE = os.path.dirname(os.path.abspath(__file__))
STATE_GAUGE = "sharedsub_delivery_state_seqs"


def log(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def rss_of(pid: int) -> int | None:
    """Resident bytes of one process (not its children)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


def metrics_url(data_dir: str) -> str | None:
    """The /metrics URL the running serve recorded in its discovery file."""
    from sharedsub.runtime.discovery import read_service_file  # the project under test

    info = read_service_file(data_dir)
    return f"{info.admin_url}/metrics" if info is not None and info.admin_url else None


def gauge_total(url: str, name: str) -> float | None:
    """Sum of the samples of gauge ``name`` on a Prometheus text page (None when absent)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name)]
    return sum(values) if values else None


def slope_mib_per_min(points: list[tuple[float, int]]) -> float | None:
    """Least-squares slope of (seconds, bytes) in MiB per minute."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(b for _, b in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    if var == 0:
        return None
    cov = sum((t - mx) * (b - my) for t, b in points)
    return cov / var * 60 / 2**20


class Sampler(threading.Thread):
    """Samples memory every ``every`` seconds until stopped."""

    def __init__(self, broker: str, pid: int, every: float, emit: Any, metrics: str | None) -> None:
        super().__init__(daemon=True)
        self.broker, self.pid, self.every, self.emit, self.metrics = broker, pid, every, emit, metrics
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every):
            sample = {
                "bench": "soak_sample",
                "broker": self.broker,
                "t_s": round(time.monotonic() - self.t0, 1),
                "process_rss_bytes": rss_of(self.pid),
                "tree_rss_bytes": procstat.tree_rss_bytes(self.pid),
            }
            if self.metrics:
                sample["delivery_state_seqs"] = gauge_total(self.metrics, STATE_GAUGE)
            self.samples.append(sample)
            self.emit(sample)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(self.every + 10)


def summarise(broker: str, samples: list[dict[str, Any]], warmup: float, load: dict[str, Any]) -> dict[str, Any]:
    steady = [s for s in samples if s["t_s"] >= warmup]
    out: dict[str, Any] = {"bench": "soak", "broker": broker, "steady_samples": len(steady)}
    for field in ("process_rss_bytes", "tree_rss_bytes"):
        points = [(s["t_s"], s[field]) for s in steady if s.get(field)]
        if points:
            out[f"{field}_first"] = points[0][1]
            out[f"{field}_last"] = points[-1][1]
            out[f"{field}_growth"] = points[-1][1] - points[0][1]
            out[f"{field}_slope_mib_per_min"] = slope_mib_per_min(points)
    states = [s["delivery_state_seqs"] for s in steady if s.get("delivery_state_seqs") is not None]
    if states:
        out["delivery_state_seqs_max"] = max(states)
        out["delivery_state_seqs_last"] = states[-1]
    for key in ("sent", "measured_sent", "missing_deliveries", "missing_accepts", "duplicates", "credit_stalls",
                "timed_out", "error_count", "e2e_p50_ms", "e2e_p99_ms"):
        if key in load:
            out[key] = load[key]
    return out


def soak(target: Any, broker: str, args: argparse.Namespace, emit: Any) -> dict[str, Any]:
    with target:
        # sharedsub's topic is created before it starts (the CLI writes the data dir); RabbitMQ's
        # queue is declared once it runs.
        if isinstance(target, SharedSubService):
            target.create_topics([target.route("soak", subscribe=True).publish_address])
        log(f"starting {broker}")
        target.start()
        route = target.route("soak", subscribe=True)
        pid = target.broker_pid()
        metrics = metrics_url(target.data_dir) if isinstance(target, SharedSubService) else None
        sampler = Sampler(broker, pid, args.sample, emit, metrics)
        sampler.start()
        log(f"{broker}: {args.rate:.0f} msg/s for {args.warmup + args.duration:.0f} s "
            f"(the first {args.warmup:.0f} s are warm-up)")
        load = workloads.latency_at_rate(
            target.url, route.publish_address, route.subscribe_address, rate=args.rate,
            warmup_s=args.warmup, duration_s=args.duration, drain_s=60.0,
            timeout_s=args.warmup + args.duration + 600,
        )
        sampler.stop()
        target.stop()
    return summarise(broker, sampler.samples, args.warmup, load)


def table(summaries: list[dict[str, Any]]) -> str:
    def mib(v: Any) -> str:
        return f"{v / 2**20:,.0f}" if isinstance(v, int | float) else "–"

    def slope(v: Any) -> str:
        return f"{v:+.2f}" if isinstance(v, int | float) else "–"

    out = [
        "| broker | process RSS first → last (MiB) | slope (MiB/min) | tree RSS first → last (MiB) "
        "| slope (MiB/min) | delivery state seqs max | sent | missing |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summaries:
        proc = f"{mib(s.get('process_rss_bytes_first'))} → {mib(s.get('process_rss_bytes_last'))}"
        tree = f"{mib(s.get('tree_rss_bytes_first'))} → {mib(s.get('tree_rss_bytes_last'))}"
        out.append(
            f"| {s['broker']} | {proc} | {slope(s.get('process_rss_bytes_slope_mib_per_min'))} | {tree} "
            f"| {slope(s.get('tree_rss_bytes_slope_mib_per_min'))} | {s.get('delivery_state_seqs_max', 'n/a')} "
            f"| {s.get('sent', '–')} | {s.get('missing_deliveries', '–')} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="measured seconds after the warm-up (default 600)")
    p.add_argument("--warmup", type=float, default=120.0, help="warm-up seconds, not summarised (default 120)")
    p.add_argument("--rate", type=float, default=1000.0, help="publish rate, msg/s (default 1000)")
    p.add_argument("--sample", type=float, default=10.0, help="seconds between memory samples (default 10)")
    p.add_argument("--brokers", default="rabbitmq,sharedsub", help="comma-separated: rabbitmq, sharedsub")
    p.add_argument("--out-dir", default=os.path.join(HERE, "out"))
    p.add_argument("--serve-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment of sharedsub serve, e.g. SHAREDSUB_MAINTENANCE_INTERVAL=60 (repeatable)")
    args = p.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(args.out_dir, f"soak-{stamp}.jsonl")
    lock = threading.Lock()

    def emit(line: dict[str, Any]) -> None:
        with lock, open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    emit({"bench": "meta", "command": shlex.join(sys.orig_argv), "commit": report.describe_commit(os.path.dirname(HERE)),
          "machine": procstat.machine_info(), "settings": vars(args)})
    summaries = []
    for broker in [b.strip() for b in args.brokers.split(",") if b.strip()]:
        if broker == "rabbitmq":
            target: Any = RabbitMQPeer(log=log)
        elif broker == "sharedsub":
            env = dict(item.split("=", 1) for item in args.serve_env)
            target = SharedSubService(log=log, log_path=os.path.join(args.out_dir, f"soak-serve-{stamp}.log"), env=env)
        else:
            p.error(f"unknown broker {broker!r}")
        summary = soak(target, broker, args, emit)
        emit(summary)
        summaries.append(summary)
    print(table(summaries))
    print(f"\nraw lines: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
