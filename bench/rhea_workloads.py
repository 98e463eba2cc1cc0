"""The publish, consume and many-subscriptions workloads driven by rhea (bench/rhea_client.js) in
a Node.js process.

publish and consume take the same arguments and return the same result keys as
:func:`workloads.publish_throughput` and :func:`workloads.consume_backlog`, so bench/run.py can
use either client (``--client``); :func:`many_subs` exists only here (bench/many_subs.py). The
client's CPU is the Node.js process's; the broker's is read through ``cpu_probe`` when the client
reports the measured span's start and end (a line on its stdout, read as it comes).

rhea comes from the rhea test tier's packages (tests/rhea/node_modules, installed by
``python3 bootstrap.py test`` or ``npm ci`` in tests/rhea).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procstat
from workloads import CpuProbe

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "rhea_client.js"
NODE_MODULES = ROOT / "tests" / "rhea" / "node_modules"


def available() -> str | None:
    """None when the rhea client can run here, else why not."""
    if shutil.which("node") is None:
        return "node is not installed (python3 bootstrap.py test installs Node.js)"
    if not (NODE_MODULES / "rhea").is_dir():
        return f"rhea is not installed in {NODE_MODULES} (run npm ci in tests/rhea)"
    return None


def _run(
    args: dict[str, Any], start_marks: set[str], end_marks: set[str], cpu_probe: CpuProbe, timeout_s: float,
    on_mark: Callable[[str], str | None] | None = None,
) -> dict[str, Any]:
    """Run one workload; CPU of both sides is read at the first start mark and the first end mark.

    ``on_mark(name)``, when given, is called at every mark after those readings (the client's
    stdin is then a pipe): what it returns, unless None, is written to the client's stdin as a
    line (the many_subs workload waits for one before publishing).
    """
    why = available()
    if why is not None:
        raise RuntimeError(f"rhea client unavailable: {why}")
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES))
    proc = subprocess.Popen(
        ["node", str(SCRIPT), json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        stdin=subprocess.PIPE if on_mark is not None else subprocess.DEVNULL,
    )
    marks: list[tuple[float | None, float | None]] = []
    result: dict[str, Any] | None = None
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            item = json.loads(line)
            name = item.get("mark")
            if (name in start_marks and not marks) or (name in end_marks and len(marks) == 1):
                marks.append((procstat.process_cpu_seconds(proc.pid), cpu_probe()))
            if name is not None and on_mark is not None:
                reply = on_mark(name)
                if reply is not None and proc.stdin is not None:
                    try:
                        proc.stdin.write(reply + "\n")
                        proc.stdin.flush()
                    except BrokenPipeError:
                        pass  # the client ended meanwhile; its result (or its absence) says why
            if "result" in item:
                result = item["result"]
        proc.wait(timeout=timeout_s + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
    stderr = proc.stderr.read() if proc.stderr is not None else ""
    if result is None:
        raise RuntimeError(f"rhea client gave no result (exit {proc.returncode}): {stderr.strip()[-2000:]}")
    result["client"] = "rhea"
    if len(marks) == 2:
        (client0, broker0), (client1, broker1) = marks
        if client0 is not None and client1 is not None:
            result["client_cpu_s"] = client1 - client0
        if broker0 is not None and broker1 is not None:
            result["broker_cpu_s"] = broker1 - broker0
    return result


def publish_throughput(
    url: str, address: str, *, warmup: int, count: int, window: int = 1000, size: int = 1024,
    timeout_s: float = 120.0, cpu_probe: CpuProbe = lambda: None,
) -> dict[str, Any]:
    """See :func:`workloads.publish_throughput` (no ``connect_options``: plain AMQP, anonymous)."""
    args = {
        "workload": "publish", "url": url, "address": address, "warmup": warmup, "count": count,
        "window": window, "size": size, "timeout_s": timeout_s,
    }
    res = _run(args, {"start"}, {"end"}, cpu_probe, timeout_s)
    res.setdefault("wall_s", None)
    return res


def consume_backlog(
    url: str, address: str, *, consumers: int, count: int, prefetch: int = 100, link_name: str,
    shared_durable: bool, timeout_s: float = 300.0, cpu_probe: CpuProbe = lambda: None,
) -> dict[str, Any]:
    """See :func:`workloads.consume_backlog`; ``shared_durable``: each link's source is the one
    of a Qpid JMS global shared durable consumer (workloads.shared_durable_source), else the
    bare address."""
    args = {
        "workload": "consume", "url": url, "address": address, "consumers": consumers, "count": count,
        "prefetch": prefetch, "link_name": link_name, "shared_durable": shared_durable, "timeout_s": timeout_s,
    }
    # CPU from the first delivery to the last distinct message, as the proton workload reads it.
    return _run(args, {"first"}, {"done"}, cpu_probe, timeout_s)


def many_subs(
    url: str, address: str, *, subscriptions: int, consumers: int, count: int, container_id: str,
    modulo: int = 100, links_per_connection: int = 500, prefetch: int = 100, window: int = 1000,
    size: int = 1024, attach_timeout_s: float = 600.0, timeout_s: float = 600.0,
    cpu_probe: CpuProbe = lambda: None, on_attached: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the many_subs workload of bench/rhea_client.js (the contract: bench/many_subs.py).

    ``on_attached`` runs once every subscription is made and before the first message is sent
    (the client waits for it: the idle broker can be measured then). The result adds to the
    client's keys ``broker_cpu_s`` and ``client_cpu_s`` from the first send to the last expected
    delivery (present when the run got there), and ``broker_cpu_s_attach`` over the attaches.
    ``attach_timeout_s`` bounds the attaches, ``timeout_s`` publishing and delivering.
    """
    args = {
        "workload": "many_subs", "url": url, "address": address, "subscriptions": subscriptions,
        "consumers": consumers, "count": count, "container_id": container_id, "modulo": modulo,
        "links_per_connection": links_per_connection, "prefetch": prefetch, "window": window, "size": size,
        "attach_timeout_s": attach_timeout_s, "timeout_s": timeout_s, "pause": True,
    }
    attach_cpu: dict[str, float | None] = {}

    def on_mark(name: str) -> str | None:
        if name in ("attach_start", "attached"):
            attach_cpu[name] = cpu_probe()
        if name != "attached":
            return None
        if on_attached is not None:
            on_attached()
        return "go"

    res = _run(args, {"publish_start"}, {"delivered"}, cpu_probe, attach_timeout_s + timeout_s, on_mark)
    a0, a1 = attach_cpu.get("attach_start"), attach_cpu.get("attached")
    res["broker_cpu_s_attach"] = a1 - a0 if a0 is not None and a1 is not None else None
    return res
