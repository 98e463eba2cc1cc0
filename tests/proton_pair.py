"""Two proton engines joined in memory (no sockets, no reactor): a client connection with one
receiver and the server side's sender link, for tests of what our code does to real proton links
and the events proton raises for it."""

from __future__ import annotations

from collections.abc import Iterator

import proton
from proton import Collector, Connection, Event, Message, Transport


def pump(a: Transport, b: Transport) -> None:
    """Move bytes both ways until neither side has any to write."""
    while True:
        moved = 0
        for src, dst in ((a, b), (b, a)):
            pending = src.pending()
            data = src.peek(pending) if pending > 0 else None
            if data:
                dst.push(data)
                src.pop(pending)
                moved += pending
        if not moved:
            return


class LinkedPair:
    """A client connection with one receiver granting ``credit``, and the server side's sender
    link, whose connection reports its events to ``collector``."""

    def __init__(self, collector: Collector, name: str, credit: int) -> None:
        self.server = Connection()
        self.server.collect(collector)
        self.server_transport = Transport(Transport.SERVER)
        self.server_transport.bind(self.server)
        self.client = Connection()
        self.client.container = name
        self.client_transport = Transport()
        self.client_transport.bind(self.client)
        self.client.open()
        session = self.client.session()
        session.open()
        self.receiver = session.receiver("sub")
        self.receiver.source.address = "t::sub"
        self.receiver.open()
        self.receiver.flow(credit)
        pump(self.client_transport, self.server_transport)
        self.server.open()
        server_session = self.server.session_head(0)
        assert server_session is not None
        server_session.open()
        link = self.server.link_head(0)
        assert isinstance(link, proton.Sender)
        link.source.address = "t::sub"
        link.open()
        self.sender = link
        pump(self.client_transport, self.server_transport)
        assert self.sender.credit == credit

    def arrived(self) -> list[tuple[str, bytes, bool]]:
        """(tag, payload, settled by the sender) of each whole delivery that reached the client's
        receiver since the last call, in arrival order (the frames in flight moved first)."""
        pump(self.client_transport, self.server_transport)
        seen = []
        while (dlv := self.receiver.current) is not None and dlv.readable and not dlv.partial:
            seen.append((str(dlv.tag), bytes(self.receiver.recv(dlv.pending) or b""), bool(dlv.settled)))
            self.receiver.advance()
        return seen

    def received(self) -> list[int]:
        """Seqs (message bodies) of the deliveries that reached the client, in arrival order."""
        return [body(payload) for _tag, payload, _settled in self.arrived()]


def body(payload: bytes) -> int:
    """The int body of an encoded message."""
    msg = Message()
    msg.decode(payload)
    assert isinstance(msg.body, int)
    return msg.body


def publisher_engines(collector: Collector, max_frame: int | None = None) -> tuple[Transport, Transport, proton.Sender]:
    """A client connection with one sender (a publisher to ``t``), attach sent, and a server
    connection reporting its events to ``collector``; (client transport, server transport,
    the client's sender). ``max_frame``: both transports' frame size limit."""
    server = Connection()
    server.collect(collector)
    server_transport = Transport(Transport.SERVER)
    client = Connection()
    client_transport = Transport()
    if max_frame is not None:
        server_transport.max_frame_size = max_frame
        client_transport.max_frame_size = max_frame
    server_transport.bind(server)
    client_transport.bind(client)
    client.open()
    session = client.session()
    session.open()
    sender = session.sender("pub")
    sender.target.address = "t"
    sender.open()
    return client_transport, server_transport, sender


def drain(collector: Collector) -> Iterator[Event]:
    while (event := collector.peek()) is not None:
        yield event
        collector.pop()
