"""What connectors.amqp.handler ``on_delivery`` relies on in proton: every delivery a publisher
completes is followed by a DELIVERY event for it, and at that event it is the link's current
delivery (``readable``). The handler reads only the event's delivery; were an event missing or
late, a message would wait unread. Real proton engines joined in memory: a client sends messages
of random sizes (some over many frames), and the byte stream reaches the server in random
pieces."""

from __future__ import annotations

import proton
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Collector, Event

from tests.proton_pair import drain, publisher_engines

MAX_FRAME = 4096  # small frames: large messages span many of them


def _handle(collector: Collector, got: list[bytes]) -> None:
    """The server side as the front end does it: answer opens, give credit, and at each DELIVERY
    event read that event's delivery when it is current and complete."""
    for event in drain(collector):
        if event.type == Event.CONNECTION_REMOTE_OPEN:
            event.connection.open()
        elif event.type == Event.SESSION_REMOTE_OPEN:
            event.session.open()
        elif event.type == Event.LINK_REMOTE_OPEN:
            event.link.open()
            event.link.flow(1000)
        elif event.type == Event.DELIVERY:
            dlv, link = event.delivery, event.link
            if dlv.readable and not dlv.partial:
                got.append(bytes(link.recv(dlv.pending) or b""))
                link.advance()
                dlv.update(proton.Delivery.ACCEPTED)
                dlv.settle()


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=20000), min_size=1, max_size=40),
    pieces=st.lists(st.integers(min_value=1, max_value=9000), min_size=1, max_size=20),
)
def test_each_completed_delivery_has_an_event_that_finds_it_current(sizes: list[int], pieces: list[int]) -> None:
    collector = Collector()
    client_transport, server_transport, sender = publisher_engines(collector, MAX_FRAME)
    got: list[bytes] = []
    sent: list[bytes] = []
    cut = 0
    for _ in range(1_000_000):  # bounded in case the engines never stop moving bytes
        while sender.credit > 0 and len(sent) < len(sizes):
            body = bytes([len(sent) % 251]) * sizes[len(sent)]
            sender.delivery(str(len(sent)))
            sender.send(body)
            sender.advance()
            sent.append(body)
        moved = False
        pending = client_transport.pending()
        if pending > 0:
            n = min(pending, pieces[cut % len(pieces)], max(server_transport.capacity(), 0))
            cut += 1
            if n > 0:
                server_transport.push(client_transport.peek(n))
                client_transport.pop(n)
                moved = True
        _handle(collector, got)
        back = server_transport.pending()
        if back > 0:
            client_transport.push(server_transport.peek(back))
            server_transport.pop(back)
            moved = True
        if not moved:
            break  # nothing moved either way: nothing ever will
    assert got == sent
