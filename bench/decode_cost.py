"""What reading a published message costs the reactor thread: the old path against the new one.

    .venv/bin/python bench/decode_cost.py [--rounds 7] [--count 20000]

Old path (what ``FrontEnd._on_published`` did up to issue 13): ``translate.check_encoding``,
``proton.Message().decode``, ``translate.message_columns`` and ``addressing.routing_key``. New
path: ``sharedsub.core.publish.amqp_message.decode`` and ``addressing.routing_key``. Two messages, both
encoded by proton: a Qpid JMS-style TextMessage (header, message-annotations, properties with a
string message-id, to, creation-time, four application properties, a 1 KB amqp-value string)
and a bare data message (one data section of 1 KB). Each round times ``--count`` decodes of one
message with one path; paths and messages interleave; prints CPU µs per message, the median over
``--rounds`` rounds (min–max) and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import proton
from proton import byte, symbol

from sharedsub.core import addressing
from sharedsub.core.publish import amqp_message
from tests import proton_columns as translate  # the pre-issue-13 path, kept as the tests' oracle

ADDRESS = addressing.parse_address("orders")


def jms_text_message() -> bytes:
    """A TextMessage as Qpid JMS sends it: durable, JMS annotations, string id, 1 KB text."""
    msg = proton.Message(
        body="x" * 1024,
        durable=True,
        id="ID:5b7c8e0e-3c59-4b7c-9a35-0c9c5f1d2e3a:1:1:1-1",
        address="orders",
        creation_time=1_763_900_000.123,
        properties={"routing-key": "eu.orders.new", "customer": "c-42", "amount": 1250, "priority-order": True},
        annotations={symbol("x-opt-jms-msg-type"): byte(5), symbol("x-opt-jms-dest"): byte(1)},
    )
    return bytes(msg.encode())


def data_message() -> bytes:
    """A bare message: one data section of 1 KB, nothing else."""
    msg = proton.Message(body=b"\x00" * 1024)
    msg.inferred = True
    return bytes(msg.encode())


def old_path(raw: bytes) -> Any:
    translate.check_encoding(raw)
    msg = proton.Message()
    msg.decode(raw)
    columns = translate.message_columns(msg)
    columns["routing_key"] = addressing.routing_key(ADDRESS, msg.properties, msg.subject)
    return columns


def new_path(raw: bytes) -> Any:
    decoded = amqp_message.decode(raw)
    columns = decoded.columns
    columns["routing_key"] = addressing.routing_key(ADDRESS, decoded.routing_properties, decoded.subject)
    return columns


def time_round(path: Callable[[bytes], Any], raw: bytes, count: int) -> float:
    """CPU µs per message over ``count`` decodes (this thread's CPU time: the machines the bench
    runs on are shared, and wall time would count other processes' turns)."""
    started = time.thread_time()
    for _ in range(count):
        path(raw)
    return (time.thread_time() - started) / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", type=int, default=20000)
    args = parser.parse_args(argv)
    messages = {"JMS TextMessage, 1 KB text, 4 properties": jms_text_message(),
                "bare data message, 1 KB": data_message()}
    paths = {"old": old_path, "new": new_path}
    for raw in messages.values():  # the two paths agree (and warm up)
        old, new = old_path(raw), new_path(raw)
        assert old == new, (old, new)
    times: dict[tuple[str, str], list[float]] = {(m, p): [] for m in messages for p in paths}
    for _ in range(args.rounds):
        for name, raw in messages.items():
            for path_name, path in paths.items():
                times[(name, path_name)].append(time_round(path, raw, args.count))
    print("| message | bytes | old path µs/msg | new path µs/msg | old ÷ new |")
    print("| --- | --- | --- | --- | --- |")
    for name, raw in messages.items():
        cells = []
        for path_name in paths:
            values = times[(name, path_name)]
            cells.append(f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})")
        ratio = statistics.median(times[(name, "old")]) / statistics.median(times[(name, "new")])
        print(f"| {name} | {len(raw)} | {cells[0]} | {cells[1]} | {ratio:.1f}× |")
    print(f"\ncommand: .venv/bin/python bench/decode_cost.py --rounds {args.rounds} --count {args.count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
