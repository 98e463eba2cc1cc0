"""connectors.amqp.wire.proton_events: what reaches the handler and what the loop's sockets, and that the
short cut for message events hands the handler what proton's own events would. Events come from
real proton engines joined in memory (tests/proton_pair.py)."""

from __future__ import annotations

import gc
import logging
from typing import Any

import proton
import pytest
from proton import Transport

from connectors.amqp.wire.proton_events import EventCollector, EventPump, c_object, link_key_of, transfer_of
from tests.proton_pair import LinkedPair, publisher_engines, pump


class _Handler(proton.Handler):
    def __init__(self, log: list[str], fail_on: str | None = None) -> None:
        self.log = log
        self.fail_on = fail_on

    def on_unhandled(self, method: str, *args: Any) -> None:
        self.log.append(method)
        if method == self.fail_on:
            raise RuntimeError(f"fault in {method}")


class _Seen(proton.Handler):
    """Records what each message event carries (as the front end reads it); ``child`` makes the
    pump dispatch through proton's own events."""

    def __init__(self, child: bool) -> None:
        self.seen: list[tuple[Any, ...]] = []
        if child:
            self.handlers.append(proton.Handler())

    def on_delivery(self, event: Any) -> None:
        transfer = transfer_of(event)  # read before proton's wrapper, and compared with it
        read = (transfer.tag, transfer.remote_state, transfer.settled, transfer.readable)
        key = link_key_of(event)  # read before the link is wrapped on the short cut
        dlv, link = event.delivery, event.link
        self.seen.append((
            "delivery", link.name, link.is_sender, dlv.tag, dlv.remote_state, dlv.settled, dlv.readable,
            event.connection == link.connection, event.session == link.session,
            read == (dlv.tag, int(dlv.remote_state), dlv.settled, dlv.readable),
            key == c_object(link) and hash(key) == hash(c_object(link)),
        ))

    def on_link_flow(self, event: Any) -> None:
        key = link_key_of(event)
        self.seen.append((
            "flow", event.link.name, event.link.credit, event.connection == event.link.connection,
            {key: "found"}.get(c_object(event.link)),
        ))

    def on_link_remote_open(self, event: Any) -> None:
        self.seen.append(("open", event.link.name))


class _Sockets:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.changed: list[Transport] = []
        self.closed: list[Transport] = []

    def transport_changed(self, transport: Transport) -> None:
        self.changed.append(transport)

    def transport_closed(self, transport: Transport) -> None:
        self.log.append("sockets: closed")
        self.closed.append(transport)


def _traffic(collector: EventCollector) -> LinkedPair:
    """A pair whose server sent one message the client accepted, then gave more credit."""
    pair = LinkedPair(collector, "c", credit=2)
    dlv = pair.sender.delivery("1")
    pair.sender.send(b"m")
    pair.sender.advance()
    pump(pair.client_transport, pair.server_transport)
    received = pair.receiver.current
    assert received is not None
    received.update(proton.Delivery.ACCEPTED)
    received.settle()
    pair.receiver.flow(3)
    pump(pair.client_transport, pair.server_transport)
    assert dlv.remote_state == proton.Delivery.ACCEPTED
    return pair


def test_transport_events_go_to_the_sockets_and_every_other_to_the_handler() -> None:
    collector = EventCollector()
    pair = _traffic(collector)
    log: list[str] = []
    sockets = _Sockets(log)
    EventPump(collector, _Handler(log), sockets).drain()
    assert collector.peek() is None
    assert "on_transport" not in log
    assert {"on_connection_init", "on_link_remote_open", "on_delivery", "on_link_flow"} <= set(log)
    assert sockets.changed and all(t == pair.server_transport for t in sockets.changed)


def _closed(collector: EventCollector) -> LinkedPair:
    """A pair after traffic whose server transport is then closed at both ends."""
    pair = _traffic(collector)
    pair.server_transport.close_tail()
    pair.server_transport.close_head()
    return pair


def test_transport_closed_reaches_the_handler_then_the_sockets() -> None:
    collector = EventCollector()
    pair = _closed(collector)
    log: list[str] = []
    sockets = _Sockets(log)
    EventPump(collector, _Handler(log), sockets).drain()
    assert log[-2:] == ["on_transport_closed", "sockets: closed"]
    assert sockets.closed == [pair.server_transport]


def test_a_handler_fault_is_logged_and_the_next_events_are_handled(caplog: pytest.LogCaptureFixture) -> None:
    collector = EventCollector()
    pair = _closed(collector)
    log: list[str] = []
    sockets = _Sockets(log)
    with caplog.at_level(logging.ERROR):
        EventPump(collector, _Handler(log, fail_on="on_transport_closed"), sockets).drain()
    assert "fault in on_transport_closed" in caplog.text
    assert "on_delivery" in log
    assert sockets.closed == [pair.server_transport]  # the socket closes even so
    assert collector.peek() is None


def test_the_short_cut_hands_the_handler_what_protons_events_do() -> None:
    seen = []
    for child in (False, True):
        collector = EventCollector()
        _traffic(collector)
        handler = _Seen(child)
        EventPump(collector, handler, _Sockets([])).drain()
        seen.append(handler.seen)
    short_cut, proton_events = seen
    assert short_cut == proton_events
    kinds = {entry[0] for entry in short_cut}
    assert {"delivery", "flow", "open"} <= kinds
    assert any(entry[0] == "delivery" and entry[4] == proton.Delivery.ACCEPTED for entry in short_cut)
    deliveries = [entry for entry in short_cut if entry[0] == "delivery"]
    assert all(entry[-2] is True for entry in deliveries)  # Transfer reads as proton's wrapper
    assert all(entry[-1] is True for entry in deliveries)  # the link's key is its wrapper's C object
    assert all(entry[-1] == "found" for entry in short_cut if entry[0] == "flow")  # and keys a dict as it



class _Runs(proton.Handler):
    """Logs deliveries, flows and the ends of delivery runs."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def on_delivery(self, event: Any) -> None:
        self.log.append(f"delivery {event.delivery.tag}")

    def on_link_flow(self, event: Any) -> None:
        self.log.append("flow")

    def on_deliveries_done(self) -> None:
        self.log.append("done")


@pytest.mark.parametrize("then_flow", [True, False])
def test_a_run_of_delivery_events_ends_before_the_next_other_event_and_before_drain_returns(then_flow: bool) -> None:
    """The handler's on_deliveries_done comes once after consecutive dispositions (a consumer
    accepting what it got), before the flow that follows them, or at the end of the drain."""
    collector = EventCollector()
    pair = LinkedPair(collector, "c", credit=3)
    for tag in ("1", "2", "3"):
        pair.sender.delivery(tag)
        pair.sender.send(b"m")
        pair.sender.advance()
    pump(pair.client_transport, pair.server_transport)
    EventPump(collector, _Runs(), _Sockets([])).drain()  # what the sends queued
    while (received := pair.receiver.current) is not None:
        received.update(proton.Delivery.ACCEPTED)
        received.settle()
        pair.receiver.advance()
    pump(pair.client_transport, pair.server_transport)
    if then_flow:  # in frames of its own after the dispositions' (proton writes flows first)
        pair.receiver.flow(3)
        pump(pair.client_transport, pair.server_transport)
    handler = _Runs()
    EventPump(collector, handler, _Sockets([])).drain()
    assert collector.peek() is None
    log = handler.log
    assert log[-1] == ("flow" if then_flow else "done"), log
    assert log.count("done") == 1 and log[log.index("done") - 1].startswith("delivery"), log
    assert all(entry.startswith("delivery") for entry in log[: log.index("done")]), log


class _Publishes(proton.Handler):
    """A server that reads each complete published transfer as the front end does, through
    ``transfer_of``, records what proton's own wrapper says of it, and keeps the transfers to
    settle later (as the front end does once their commit is done)."""

    def __init__(self, child: bool) -> None:
        self.kept: list[Any] = []
        self.seen: list[tuple[Any, ...]] = []
        self.bodies: list[bytes] = []
        if child:
            self.handlers.append(proton.Handler())  # the pump then dispatches proton's own events

    def on_connection_remote_open(self, event: Any) -> None:
        event.connection.open()

    def on_session_remote_open(self, event: Any) -> None:
        event.session.open()

    def on_link_remote_open(self, event: Any) -> None:
        event.link.open()
        event.link.flow(10)

    def on_delivery(self, event: Any) -> None:
        transfer = transfer_of(event)
        dlv = event.delivery
        self.seen.append((
            transfer.readable, dlv.readable, transfer.partial, dlv.partial,
            transfer.pending, dlv.pending, transfer.remote_state, int(dlv.remote_state),
        ))
        if transfer.readable and not transfer.partial:
            self.bodies.append(bytes(event.link.recv(transfer.pending) or b""))
            event.link.advance()
            self.kept.append(transfer)


@pytest.mark.parametrize("child", [False, True], ids=["short cut", "proton events"])
def test_a_kept_transfer_reads_as_protons_delivery_and_accepts_after_its_event(child: bool) -> None:
    collector = EventCollector()
    client_transport, server_transport, sender = publisher_engines(collector)
    handler = _Publishes(child)
    pump(client_transport, server_transport)
    EventPump(collector, handler, _Sockets([])).drain()
    pump(client_transport, server_transport)
    sent = []
    for i in range(3):
        sent.append(sender.delivery(str(i)))
        sender.send(b"m%d" % i)
        sender.advance()
    pump(client_transport, server_transport)
    EventPump(collector, handler, _Sockets([])).drain()
    assert handler.bodies == [b"m0", b"m1", b"m2"]
    assert handler.seen and all(entry[0::2] == entry[1::2] for entry in handler.seen), handler.seen
    gc.collect()  # the events and their wrappers are gone: the kept transfers hold the deliveries
    for transfer in handler.kept:
        transfer.accept()
    pump(client_transport, server_transport)
    assert [d.remote_state for d in sent] == [proton.Delivery.ACCEPTED] * 3
    assert all(d.settled for d in sent)  # settled by the receiver
