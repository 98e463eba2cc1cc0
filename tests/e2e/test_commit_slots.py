"""Group commits on the fan-out's ticks, through a real ``sharedsub serve`` with the defaults
(``[publish] commit_lead``, sharedsub.core.publish.commit_pace.next_slot): a publisher that keeps
several messages in flight at a steady pace has its groups held by the commit interval, and those
start at *slots*, ``lead`` seconds before a multiple of the slot period on the wall clock, so that
one group per trigger interval lands just before Spark starts a micro-batch.

The committer's unit test (tests/unit/test_committer_memory.py) checks the rule on a memory
store; this one checks that serve composes it: each group's ``published_at`` (the time its topic
append started) is read back from the topic table."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from sharedsub.core import config, layout
from sharedsub.core.publish.commit_pace import next_slot
from sharedsub.storage.delta.table_reads import read_table
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

SPACING = 0.002  # seconds between two paced sends: ~25 messages a group at the 0.05 s interval, so
# that some are always in flight (a publisher whose every message is settled before it sends the
# next is taken for a synchronous one, and its groups start at once: commit_pace)
BURST = 100  # sent at once first: the link's window, as the committer sees it (commit_pace.PublisherPace)
EPISODE = 150  # paced messages an episode: ~6 groups
PAUSE = 0.25  # seconds between episodes: the next one's first group is not held
OFFSETS = (0.010, 0.020, 0.030, 0.040)  # where each episode starts, seconds past a slot


class _PacedPublisher(MessagingHandler):
    """Sends a message at each of ``times`` (``time.time()`` values, ascending), several at the
    same time at once, without waiting for outcomes; closes when all are accepted."""

    def __init__(self, url: str, address: str, times: list[float]) -> None:
        super().__init__(auto_settle=True)
        self.url, self.address, self.times = url, address, times
        self.sent = self.accepted = 0
        self.error: str | None = None
        self._sender: Any = None  # Any: proton's Sender

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url, reconnect=False)
        self._sender = event.container.create_sender(conn, self.address)

    def on_link_opened(self, event: Any) -> None:
        self._send_due(event)

    def on_timer_task(self, event: Any) -> None:
        self._send_due(event)

    def _send_due(self, event: Any) -> None:
        now = time.time()
        while self.sent < len(self.times) and self.times[self.sent] <= now and self._sender.credit:
            self._sender.send(Message(body=f"m{self.sent}", durable=True))
            self.sent += 1
        if self.sent < len(self.times):
            event.container.schedule(max(0.0, self.times[self.sent] - time.time()), self)

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        if self.accepted == len(self.times):
            event.connection.close()

    def on_rejected(self, event: Any) -> None:
        self.error = f"rejected: {event.delivery.remote.condition}"
        event.connection.close()

    def on_transport_error(self, event: Any) -> None:
        self.error = str(event.transport.condition)


def _send_times(period: float, lead: float) -> list[float]:
    """The burst, then one episode per offset: paced sends from that far past a slot."""
    at = time.time() + 0.5  # the link is open by then
    times = [at] * BURST
    at += 2 * PAUSE
    for offset in OFFSETS:
        at = next_slot(at, period=period, lead=lead) + offset
        times += [at + i * SPACING for i in range(EPISODE)]
        at = times[-1] + PAUSE
    return times


def _publish(url: str, address: str, times: list[float]) -> None:
    handler = _PacedPublisher(url, address, times)
    done = threading.Event()

    def run() -> None:
        Container(handler).run()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), f"paced publish: {handler.accepted} of {handler.sent} accepted in 60 s"
    assert handler.error is None, handler.error


def test_held_groups_start_on_the_slots_before_the_fanouts_ticks(service: ServeProcess, topic: str) -> None:
    """Each episode's first group starts at once, at its offset past a slot. The groups after it
    are held by the interval: with slots they start just after a slot (the committer thread's
    wake-up); without, each would start one interval after the one before, keeping its
    episode's offset, 10-40 ms past the slots."""
    slots = config.commit_slots(config.defaults())
    assert slots is not None, "the defaults commit on slots (a local data dir, the trigger grid)"
    period, lead = slots
    times = _send_times(period, lead)
    _publish(service.url, topic, times)
    rows = read_table(layout.topic_table(str(service.data_dir), topic))
    assert rows is not None and rows.num_rows == len(times)
    starts = sorted({t.timestamp() for t in rows.column("published_at").to_pylist()})
    assert times[0] - 1 <= starts[0] and starts[-1] <= time.time()
    # Held groups: those that follow another within the pause (a group whose publisher is
    # awaited, sharedsub.core.publish.commit_pace, starts at once and counts against the rule).
    held = [s for before, s in zip(starts, starts[1:], strict=False) if s - before < PAUSE / 2]
    assert len(held) >= 3 * len(OFFSETS), f"{len(held)} held groups: the episodes were not spread over the interval"
    phases = [(s + lead) % period for s in held]
    on_slot = [p for p in phases if p < 0.005]
    assert len(on_slot) >= 0.6 * len(held), (
        f"{len(on_slot)} of {len(held)} held groups started within 5 ms after a slot "
        f"(period {period} s, lead {lead} s); their phases in ms: {[round(1e3 * p, 1) for p in phases]}"
    )
