"""Caps on connections, sessions and links against a real ``sharedsub frontend``: past each, the
client is refused with amqp:resource-limit-exceeded naming the setting, and the rest works."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from proton import Endpoint
from proton.handlers import MessagingHandler
from proton.reactor import Container

from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


class _Opener(MessagingHandler):
    """One connection with ``sessions`` sessions, each with ``links`` receivers; records the
    conditions the server closes things with, then lets the test end it."""

    def __init__(self, url: str, sessions: int, links: int) -> None:
        super().__init__(prefetch=0)
        self.url, self.sessions, self.links = url, sessions, links
        self.connection_error: str | None = None
        self.session_errors: list[str] = []
        self.link_errors: list[str] = []
        self.opened_links = 0
        self.settled = threading.Event()
        self._expected = 0

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url, reconnect=False)
        for _ in range(self.sessions):
            ssn = self.conn.session()
            ssn.open()
            for _ in range(self.links):
                rcv = ssn.receiver(f"l-{id(ssn)}-{self._expected}")
                rcv.source.address = "capped"
                rcv.target.address = None
                rcv.open()
                self._expected += 1
        event.container.schedule(3.0, self)  # answers are in by then; then report

    def on_timer_task(self, event: Any) -> None:
        self.settled.set()
        if not self.conn.state & Endpoint.LOCAL_CLOSED:
            self.conn.close()

    def on_connection_remote_close(self, event: Any) -> None:
        cond = event.connection.remote_condition
        self.connection_error = str(cond.name) if cond else "closed"
        self.settled.set()

    def on_session_remote_close(self, event: Any) -> None:
        cond = event.session.remote_condition
        self.session_errors.append(f"{cond.name}: {cond.description}" if cond else "ended")

    def on_session_error(self, event: Any) -> None:
        pass  # recorded above; keep the connection (the default handler would close it)

    def on_link_error(self, event: Any) -> None:
        pass

    def on_link_remote_open(self, event: Any) -> None:
        if event.link.remote_source.address is not None:
            self.opened_links += 1

    def on_link_remote_close(self, event: Any) -> None:
        cond = event.link.remote_condition
        if cond is not None:
            self.link_errors.append(f"{cond.name}: {cond.description}")

    def on_transport_error(self, event: Any) -> None:
        self.connection_error = self.connection_error or str(event.transport.condition)
        self.settled.set()


def _open(url: str, sessions: int, links: int) -> tuple[_Opener, threading.Thread]:
    opener = _Opener(url, sessions, links)
    thread = threading.Thread(target=Container(opener).run, daemon=True)
    thread.start()
    assert opener.settled.wait(60)
    return opener, thread


def test_connections_sessions_and_links_past_their_caps_are_refused(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("caps")
    create_topic(str(data), "capped")
    env = {
        "SHAREDSUB_SERVER_MAX_CONNECTIONS": "2",
        "SHAREDSUB_SERVER_MAX_SESSIONS_PER_CONNECTION": "2",
        "SHAREDSUB_SERVER_MAX_LINKS_PER_CONNECTION": "3",
    }
    proc = ServeProcess(data, command="frontend", env=env).start()
    try:
        # 3 sessions x 2 links: the third session is ended; of its 2 links' worth, 3 fit.
        first, _ = _open(proc.url, sessions=3, links=2)
        assert first.connection_error is None
        assert len(first.session_errors) == 1 and "server.max_sessions_per_connection" in first.session_errors[0]
        assert first.session_errors[0].startswith("amqp:resource-limit-exceeded")
        assert first.opened_links == 3
        assert any("server.max_links_per_connection" in e for e in first.link_errors), first.link_errors
        assert all(e.startswith("amqp:resource-limit-exceeded") for e in first.link_errors)
        # Connections: keep two open, the third is refused.
        held = [Subscriber(proc.url, "capped") for _ in range(2)]
        for h in held:
            h.start()
            h.wait_attached()
        third, _ = _open(proc.url, sessions=1, links=1)
        assert third.connection_error == "amqp:resource-limit-exceeded"
        for h in held:
            h.stop()
        # Once the server has seen them go, a connection is accepted again.
        for _ in range(20):
            again, _ = _open(proc.url, sessions=1, links=1)
            if again.connection_error is None:
                break
        assert again.connection_error is None and again.opened_links == 1
    finally:
        assert proc.stop() == 0
    assert "server.max_connections" in proc.log()
