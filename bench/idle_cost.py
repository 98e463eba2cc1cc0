"""CPU of an idle ``sharedsub serve``: a consumer attached to a shared durable subscription, nothing published.

    .venv/bin/python bench/idle_cost.py [--warmup 30] [--window 60] [--consumers 1] [--brokers sharedsub,artemis]

Starts ``sharedsub serve`` on a fresh local data dir (its defaults: the fan-out's triggers, the
tailer's polls of each subscription with consumers), attaches ``--consumers`` consumers of one
shared durable subscription with python-qpid-proton (holding credit, receiving nothing), waits
``--warmup`` seconds and then reads the CPU seconds of serve's process tree (serve, the append
child, the fan-out's Python and JVM) over ``--window`` seconds. Prints one JSON line: cores busy
in all, per command, and the busiest threads. "Latency is never bought with a busy loop": issue
31 keeps this under 0.05 cores. With ``--brokers sharedsub,artemis`` the same follows for
Artemis (bench/artemis_peer.py, its JVM's tree), one broker after the other: an idle figure moves
with the machine's hour (by 2× within half an hour here, bench/RESULTS.md issue 43), and Artemis
beside it shows how much.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from typing import Any

from proton.handlers import MessagingHandler
from proton.reactor import Container

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import procstat  # noqa: E402 (bench/ is not a package)
from artemis_peer import ArtemisPeer  # noqa: E402
from sharedsub_service import SharedSubService  # noqa: E402
from workloads import SourceSetup, shared_durable_link_name, shared_durable_source  # noqa: E402

TOPIC = "bench-idle"


class _Holders(MessagingHandler):
    """``count`` consumers of one shared durable subscription on one connection, granting credit
    and receiving whatever comes (nothing is published)."""

    def __init__(self, url: str, count: int) -> None:
        super().__init__(prefetch=100)
        self.url, self.count = url, count
        self.opened = 0
        self.received = 0
        self.errors: list[str] = []

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url, reconnect=False)
        for n in range(self.count):
            name = shared_durable_link_name("idle") if n == 0 else f"idle|global{n}"
            event.container.create_receiver(conn, TOPIC, name=name, options=SourceSetup(shared_durable_source))

    def on_link_opened(self, event: Any) -> None:
        self.opened += 1

    def on_message(self, event: Any) -> None:
        self.received += 1

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.errors.append(f"{cond.name} {cond.description}" if cond else "link closed")


def _measure(broker: str, url: str, pid: int, args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """Attach the consumers to the broker at ``url``, wait, read the CPU of the process tree
    under ``pid`` over the window; return the JSON line's fields and whether every consumer
    stayed attached."""
    holders = _Holders(url, args.consumers)
    container = Container(holders)
    threading.Thread(target=container.run, daemon=True).start()
    time.sleep(args.warmup)
    threads_before = procstat.tree_cpu_by_thread(pid)
    before, t0 = procstat.tree_cpu_by_command(pid), time.monotonic()
    time.sleep(args.window)
    after, elapsed = procstat.tree_cpu_by_command(pid), time.monotonic() - t0
    threads_after = procstat.tree_cpu_by_thread(pid)
    container.stop()
    delta = procstat.cpu_by_command_delta(before, after)
    line = {
        "bench": "idle_cost",
        "broker": broker,
        "consumers_attached": holders.opened,
        "received": holders.received,
        "errors": holders.errors[:3],
        "window_s": round(elapsed, 1),
        "cores": round(sum(delta.values()) / elapsed, 4),
        "cores_by_command": {name: round(cpu / elapsed, 4) for name, cpu in sorted(delta.items())},
        "busiest_threads": procstat.busiest_threads(threads_before, threads_after, elapsed),
        "machine": procstat.machine_info(),
    }
    return line, holders.opened == args.consumers and not holders.errors


def main() -> int:
    """Measure each broker asked for, one after the other; print a JSON line each; 0 when the
    consumers stayed attached everywhere."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds before the window (default 30)")
    parser.add_argument("--window", type=float, default=60.0, help="measured seconds (default 60)")
    parser.add_argument("--consumers", type=int, default=1, help="consumers of the subscription (default 1)")
    parser.add_argument(
        "--brokers", default="sharedsub",
        help="comma-separated, measured in this order: sharedsub, artemis (default sharedsub)",
    )
    args = parser.parse_args()
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = sorted(set(brokers) - {"sharedsub", "artemis"})
    if unknown:
        parser.error(f"unknown broker(s) {', '.join(unknown)}: sharedsub, artemis")
    ok = True
    for broker in brokers:
        log_path = os.path.join(tempfile.gettempdir(), f"{broker}-idle-cost.log")
        service: SharedSubService | ArtemisPeer
        if broker == "sharedsub":
            service = SharedSubService(log=lambda line: print(line, file=sys.stderr), log_path=log_path)
        else:
            service = ArtemisPeer(log=lambda line: print(line, file=sys.stderr), log_path=log_path)
        with service:
            if isinstance(service, SharedSubService):
                service.create_topics([TOPIC])
            service.start()
            pid = service.broker_pid()
            assert pid is not None
            line, attached = _measure(broker, service.url, pid, args)
        print(json.dumps(line), flush=True)
        ok = ok and attached
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
