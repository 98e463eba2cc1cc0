"""connectors/amqp/wire/listener.py on a real engine loop (connectors/amqp/wire/engine_loop.py), with real
proton clients on localhost sockets: listeners with and without our SASL layer side by side,
messages larger than a socket read, a client that stops reading (the loop waits for the socket to
take output again), a client that vanishes. The server is a proton MessagingHandler, so the test
also shows the loop dispatching events as proton's Container would (child handlers included).
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from connectors.amqp.wire import listener as listener_module
from connectors.amqp.wire.engine_loop import READ_SIZE, EngineLoop
from connectors.amqp.wire.listener import AmqpSocket, Listener
from sharedsub.core.security.authenticated import Identities, Identity
from sharedsub.core.security.sasl_rules import SaslPolicy

pytestmark = pytest.mark.e2e


class _Server(MessagingHandler):  # type: ignore[misc]
    """Takes messages; sends ``outgoing`` to any receiver that attaches."""

    def __init__(self, identities: Identities, outgoing: list[bytes] | None = None) -> None:
        super().__init__(prefetch=1000)
        self.identities = identities
        self.received: list[tuple[Any, Identity]] = []
        self.closed_transports = 0
        self.outgoing = list(outgoing or [])

    def on_message(self, event: Any) -> None:
        body = event.message.body
        self.received.append((bytes(body) if isinstance(body, memoryview) else body, self.identities.get(event.connection)))

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        while self.outgoing and sender.credit > 0:
            sender.send(Message(body=self.outgoing.pop(0)))

    def on_transport_closed(self, event: Any) -> None:
        self.closed_transports += 1


class _Sender(MessagingHandler):  # type: ignore[misc]
    """Sends ``bodies`` on its own connection, closes it once all are accepted."""

    def __init__(self, bodies: list[Any], done: list[Any], sasl: bool) -> None:
        super().__init__()
        self.bodies = list(bodies)
        self.total = len(bodies)
        self.done = done
        self.sasl = sasl
        self.accepted = 0

    def on_sendable(self, event: Any) -> None:
        while self.bodies and event.sender.credit > 0:
            event.sender.send(Message(body=self.bodies.pop(0)))

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        if self.accepted == self.total:
            self.done.append(self)
            event.connection.close()


def _serve(loop: EngineLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def _on_loop(loop: EngineLoop, fn: Callable[[], None]) -> None:
    loop.injector.call(fn)


def _stop(loop: EngineLoop, thread: threading.Thread, listeners: list[Listener]) -> None:
    def close() -> None:
        for lst in listeners:
            lst.close()
        loop.schedule(0.2, loop.stop)

    _on_loop(loop, close)
    thread.join(30)
    assert not thread.is_alive(), "the loop did not stop"


def _clients(setup: Callable[[Container], None], finished: Callable[[], bool], limit: float = 60.0) -> None:
    """Run a client Container on this thread: ``setup`` its connections, then poll until
    ``finished()`` (and a moment for the closes to go out) or ``limit`` seconds."""
    container = Container()
    deadline = time.monotonic() + limit

    class Poll:
        def __init__(self) -> None:
            self.ending = False

        def on_timer_task(self, event: Any) -> None:
            if self.ending or time.monotonic() > deadline:
                container.stop()
            elif finished():
                self.ending = True
                container.schedule(0.2, self)
            else:
                container.schedule(0.05, self)

    class Start:
        def on_timer_task(self, event: Any) -> None:
            setup(container)

    container.schedule(0, Start())
    container.schedule(0.05, Poll())
    container.run()


def test_listeners_with_and_without_our_sasl_layer_share_one_loop() -> None:
    identities = Identities()
    server = _Server(identities)
    loop = EngineLoop(server)
    secure = Listener(loop, "127.0.0.1", 0, identities=identities, policy=SaslPolicy(anonymous=True), auth_timeout=5)
    plain = Listener(loop, "127.0.0.1", 0, identities=identities)
    thread = _serve(loop)
    done: list[Any] = []
    cases = [(secure.port, "secure-sasl", True), (secure.port, "secure-bare", False),
             (plain.port, "plain-sasl", True), (plain.port, "plain-bare", False)]

    def setup(container: Container) -> None:
        for port, body, sasl in cases:
            conn = container.connect(f"amqp://127.0.0.1:{port}", handler=_Sender([body], done, sasl),
                                     reconnect=False, sasl_enabled=sasl)
            container.create_sender(conn, "q")

    _clients(setup, lambda: len(done) == len(cases))
    _stop(loop, thread, [secure, plain])
    assert len(done) == len(cases)
    got = dict(server.received)
    assert got["secure-sasl"] == Identity(None, "ANONYMOUS")
    assert got["secure-bare"] == Identity(None, None)
    assert got["plain-sasl"] == Identity(None, None)  # proton's own layer: no identity recorded
    assert got["plain-bare"] == Identity(None, None)
    assert not secure.authenticating
    assert server.closed_transports == len(cases)
    assert len(identities) == 0  # forgotten with their sockets


def test_messages_larger_than_a_socket_read_arrive_whole() -> None:
    identities = Identities()
    server = _Server(identities)
    loop = EngineLoop(server)
    plain = Listener(loop, "127.0.0.1", 0, identities=identities)
    thread = _serve(loop)
    bodies = [bytes([i]) * (3 * READ_SIZE + i) for i in range(4)] + [b"small"]
    done: list[Any] = []

    def setup(container: Container) -> None:
        conn = container.connect(f"amqp://127.0.0.1:{plain.port}", handler=_Sender(bodies, done, True), reconnect=False)
        container.create_sender(conn, "q")

    _clients(setup, lambda: bool(done))
    _stop(loop, thread, [plain])
    assert done
    assert [body for body, _ in server.received] == bodies


def test_output_waits_for_a_client_that_stops_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    writable = []
    original = AmqpSocket.on_writable

    def counted(self: AmqpSocket) -> None:
        writable.append(1)
        original(self)

    monkeypatch.setattr(listener_module.AmqpSocket, "on_writable", counted)
    setup_socket = listener_module._setup_socket

    def small_buffers(sock: socket.socket) -> None:
        setup_socket(sock)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)  # full long before the session window is

    monkeypatch.setattr(listener_module, "_setup_socket", small_buffers)
    identities = Identities()
    outgoing = [i.to_bytes(4, "big") * 16384 for i in range(100)]  # 64 KiB each
    server = _Server(identities, outgoing)
    loop = EngineLoop(server)
    plain = Listener(loop, "127.0.0.1", 0, identities=identities)
    thread = _serve(loop)
    received: list[bytes] = []

    class Slow(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(prefetch=len(outgoing))
            self.paused = False

        def on_link_opened(self, event: Any) -> None:
            pass

        def on_message(self, event: Any) -> None:
            if not self.paused:
                self.paused = True
                time.sleep(1.0)  # the server's sends fill both socket buffers meanwhile
            received.append(bytes(event.message.body))
            if len(received) == len(outgoing):
                event.connection.close()

    def setup(container: Container) -> None:
        conn = container.connect(f"amqp://127.0.0.1:{plain.port}", reconnect=False)
        container.create_receiver(conn, "q", handler=Slow())

    _clients(setup, lambda: len(received) == len(outgoing))
    _stop(loop, thread, [plain])
    assert received == outgoing
    assert writable, "the server never waited for the socket to take output"


def test_a_client_that_vanishes_mid_frame_is_closed_and_forgotten() -> None:
    identities = Identities()
    server = _Server(identities)
    loop = EngineLoop(server)
    plain = Listener(loop, "127.0.0.1", 0, identities=identities)
    thread = _serve(loop)
    with socket.create_connection(("127.0.0.1", plain.port)) as sock:
        sock.sendall(b"AMQP\x00\x01\x00\x00" + b"\x00\x00\x01\x00\x02\x00")  # a frame header, then gone
        time.sleep(0.3)
    deadline = time.monotonic() + 20
    while server.closed_transports < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    _stop(loop, thread, [plain])
    assert server.closed_transports == 1
    assert loop.watched() == 0  # the listener closed, no socket left


def test_a_failing_accept_pauses_the_listener_instead_of_spinning() -> None:
    # Out of file descriptors, accept fails while the listening socket stays readable: a loop that
    # keeps asking spins at full speed. The connection waits in the backlog and gets in later.
    identities = Identities()
    server = _Server(identities)
    loop = EngineLoop(server)
    plain = Listener(loop, "127.0.0.1", 0, identities=identities)
    real = plain.sock
    calls: list[float] = []
    failing_until = time.monotonic() + 0.6

    class FailingAccept:
        def fileno(self) -> int:
            return real.fileno()

        def accept(self) -> tuple[socket.socket, Any]:
            calls.append(time.monotonic())
            if time.monotonic() < failing_until:
                raise OSError(errno.EMFILE, "Too many open files")
            return real.accept()

        def close(self) -> None:
            real.close()

    plain.sock = FailingAccept()  # type: ignore[assignment]
    thread = _serve(loop)
    done: list[Any] = []

    def setup(container: Container) -> None:
        conn = container.connect(f"amqp://127.0.0.1:{plain.port}", handler=_Sender(["late"], done, True), reconnect=False)
        container.create_sender(conn, "q")

    _clients(setup, lambda: bool(done))
    _stop(loop, thread, [plain])
    assert [body for body, _ in server.received] == ["late"]
    assert plain.accept_failures >= 3
    assert len(calls) < 50, f"{len(calls)} accept calls in the failing 0.6 s: the listener spun"
