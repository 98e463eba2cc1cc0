"""The Dispatcher's sends on real proton engines (in memory, no sockets): the order it applies
them in, and the transport events that order costs.

Proton queues a transport event (and the reactor an output pass: flush, selectable update) for
each change to a connection unless the last queued event was already that connection's. A
round-robin pass over consumers on separate connections that sent in decision order would cost
one such pass per message; sent link by link it costs one per connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import proton
from proton import Collector, Connection, Event, Message, Transport

from connectors.amqp.delivery import Dispatcher, Row
from sharedsub.core.acked_seqs import AckedSeqs


def _pump(a: Transport, b: Transport) -> None:
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


class _Pair:
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
        _pump(self.client_transport, self.server_transport)
        self.server.open()
        server_session = self.server.session_head(0)
        assert server_session is not None
        server_session.open()
        link = self.server.link_head(0)
        assert isinstance(link, proton.Sender)
        link.source.address = "t::sub"
        link.open()
        self.sender = link
        _pump(self.client_transport, self.server_transport)
        assert self.sender.credit == credit

    def received(self) -> list[int]:
        """Seqs (message bodies) the client's receiver has, in arrival order."""
        _pump(self.client_transport, self.server_transport)
        seqs = []
        while (dlv := self.receiver.current) is not None and dlv.readable and not dlv.partial:
            msg = Message()
            msg.decode(self.receiver.recv(dlv.pending) or b"")
            self.receiver.advance()
            assert isinstance(msg.body, int)
            seqs.append(msg.body)
        return seqs


def _drain(collector: Collector) -> Iterator[Event]:
    while (event := collector.peek()) is not None:
        yield event
        collector.pop()


def test_a_pass_over_consumers_on_separate_connections_costs_one_transport_event_each() -> None:
    collector = Collector()
    pairs = [_Pair(collector, f"c{i}", credit=10) for i in range(3)]
    list(_drain(collector))
    d = Dispatcher(lambda _k, _n: None, lambda *_a: None, lambda *_a: None)
    d.open("k", AckedSeqs(), {})
    for pair in pairs:
        d.add_consumer("k", pair.sender)
    d.offer("k", [Row("t", seq, Message(body=seq).encode()) for seq in range(1, 13)])
    transport_events = [e for e in _drain(collector) if e.type == Event.TRANSPORT]
    assert len(transport_events) == len(pairs)
    # Still round-robin, each link's rows in seq order.
    assert [pair.received() for pair in pairs] == [[1, 4, 7, 10], [2, 5, 8, 11], [3, 6, 9, 12]]
