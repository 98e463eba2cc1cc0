"""A python-qpid-proton publisher on its own clock: each message is sent at a given time, without
waiting for outcomes (tests/e2e/test_commit_slots.py, bench/paced_groups.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


class PacedPublisher(MessagingHandler):
    """Sends a durable message at each of ``times`` (``time.time()`` values, ascending), several
    at the same time at once, as credit allows; closes when all are accepted."""

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


def publish_at(url: str, address: str, times: list[float], timeout: float = 60.0) -> None:
    """Send one message to ``address`` at each of ``times``; return once all are accepted.

    Raises:
        AssertionError: not all were accepted within ``timeout`` seconds, or one was refused or the
            connection failed.
    """
    handler = PacedPublisher(url, address, times)
    done = threading.Event()

    def run() -> None:
        Container(handler).run()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout), f"paced publish: {handler.accepted} of {handler.sent} accepted in {timeout:.0f} s"
    assert handler.error is None, handler.error
