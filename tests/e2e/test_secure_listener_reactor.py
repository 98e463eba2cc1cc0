"""connectors/amqp/secure_listener.py inside one proton Container that also has proton's stock
listener and outgoing connections: its global handler (SecureIOHandler, wrapped around the
container's own) answers for its sockets and transports only, so the other two work as before.

The container is both ends: its handler is the server (a MessagingHandler that takes messages),
and its clients are outgoing ``container.connect`` connections to the secure listener (SASL
ANONYMOUS and a bare AMQP header) and to the stock one. Localhost sockets, no service process.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from connectors.amqp.secure_listener import SecureAcceptor, SecureIOHandler
from sharedsub.core.identity import Identities, Identity
from sharedsub.core.sasl_rules import SaslPolicy

pytestmark = pytest.mark.e2e


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Server(MessagingHandler):  # type: ignore[misc]
    def __init__(self, identities: Identities) -> None:
        super().__init__()
        self.identities = identities
        self.received: list[tuple[str, Identity]] = []
        self.closed_transports = 0

    def on_message(self, event: Any) -> None:
        self.received.append((event.message.body, self.identities.get(event.connection)))

    def on_transport_closed(self, event: Any) -> None:
        self.closed_transports += 1


class _Client(MessagingHandler):  # type: ignore[misc]
    """Sends one message on its own connection, then closes it."""

    def __init__(self, body: str, done: list[str], sasl: bool) -> None:
        super().__init__()
        self.body = body
        self.done = done
        self.sasl = sasl
        self.sent = False

    def on_sendable(self, event: Any) -> None:
        if not self.sent:
            event.sender.send(Message(body=self.body))
            self.sent = True

    def on_accepted(self, event: Any) -> None:
        self.done.append(self.body)
        event.connection.close()


class _Deadline:
    def __init__(self, container: Container) -> None:
        self.container = container
        self.fired = False

    def on_timer_task(self, event: Any) -> None:
        self.fired = True
        self.container.stop()


class _Poll:
    """Every 50 ms: once every client is done, close the listeners and stop."""

    def __init__(self, container: Container, done: list[str], expected: int, listeners: list[Any]) -> None:
        self.container, self.done, self.expected, self.listeners = container, done, expected, listeners

    def on_timer_task(self, event: Any) -> None:
        if len(self.done) < self.expected:
            self.container.schedule(0.05, self)
            return
        for listener in self.listeners:
            listener.close()
        self.container.schedule(0.3, _Deadline(self.container))  # let the closes go out


def test_secure_plain_and_outgoing_connections_share_one_container() -> None:
    identities = Identities()
    server = _Server(identities)
    container = Container(server)
    stock_io = container.global_handler
    secure = SecureAcceptor(
        container, "127.0.0.1", 0, policy=SaslPolicy(anonymous=True), identities=identities, auth_timeout=5
    )
    assert isinstance(container.global_handler, SecureIOHandler)
    assert container.global_handler.base is stock_io  # wrapped, not replaced
    second = SecureAcceptor(container, "127.0.0.1", 0, policy=SaslPolicy(anonymous=True), identities=identities)
    assert second.io is secure.io  # installed once
    plain_port = _free_port()
    plain = container.listen(f"127.0.0.1:{plain_port}")  # proton's stock listener, as server.py does without [security]

    done: list[str] = []
    clients = [
        (f"amqp://127.0.0.1:{secure.port}", "secure-sasl", True),
        (f"amqp://127.0.0.1:{secure.port}", "secure-bare", False),
        (f"amqp://127.0.0.1:{second.port}", "second-sasl", True),
        (f"amqp://127.0.0.1:{plain_port}", "plain", True),
    ]

    class _Start:
        def on_timer_task(self, event: Any) -> None:
            for url, body, sasl in clients:
                client = _Client(body, done, sasl)
                conn = container.connect(url, handler=client, reconnect=False, sasl_enabled=sasl)
                container.create_sender(conn, "q")

    container.schedule(0, _Start())
    container.schedule(0.05, _Poll(container, done, len(clients), [secure, second, plain]))
    deadline = _Deadline(container)
    container.schedule(20, deadline)
    thread = threading.Thread(target=container.run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert sorted(done) == sorted(body for _, body, _ in clients)
    got = dict(server.received)
    assert got["secure-sasl"] == Identity(None, "ANONYMOUS")
    assert got["secure-bare"] == Identity(None, None)
    assert got["second-sasl"] == Identity(None, "ANONYMOUS")
    assert "plain" in got
    assert not secure.authenticating and not second.authenticating
    assert not deadline.fired
    assert not secure.io.owns(secure.selectable) and not secure.io.owns(second.selectable)  # closed, forgotten
