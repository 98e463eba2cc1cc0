"""connectors.amqp.wire.outgoing: what a consumer receives when the dispatcher sends through the C API,
beside what proton's own methods send. Real proton engines joined in memory (tests/proton_pair.py)."""

from __future__ import annotations

import gc

import proton
from proton import Collector, Event, Message

from connectors.amqp.wire.outgoing import Outgoing
from tests.proton_pair import LinkedPair, body, drain, pump


def _encoded(seq: int) -> bytes:
    return Message(body=seq, durable=True).encode()


def _arrived(pair: LinkedPair) -> list[tuple[str, int, bool]]:
    """(tag, body, settled by the sender) of each whole delivery the client has, in order."""
    return [(tag, body(payload), settled) for tag, payload, settled in pair.arrived()]


def test_sends_arrive_as_protons_own_sends_do() -> None:
    ours = LinkedPair(Collector(), "ours", credit=5)
    theirs = LinkedPair(Collector(), "theirs", credit=5)
    outgoing = Outgoing(ours.sender)
    assert outgoing.credit == 5
    for tag, seq, settle in (("1", 10, False), ("2", 11, True), ("3", 12, False)):
        outgoing.send(tag, _encoded(seq), settle)
        dlv = theirs.sender.delivery(tag)
        theirs.sender.send(_encoded(seq))
        theirs.sender.advance()
        if settle:
            dlv.settle()
        del dlv
        gc.collect()  # nothing of ours may depend on a wrapper staying alive
    expected = [("1", 10, False), ("2", 11, True), ("3", 12, False)]
    assert _arrived(ours) == expected
    assert _arrived(theirs) == expected
    assert outgoing.credit == theirs.sender.credit == 2
    # the unsettled ones are the server's unsettled deliveries, as proton's would be
    assert ours.sender.unsettled == theirs.sender.unsettled == 2


def test_the_peer_settles_what_was_sent_unsettled() -> None:
    collector = Collector()
    pair = LinkedPair(collector, "acks", credit=2)
    outgoing = Outgoing(pair.sender)
    outgoing.send("7", _encoded(1), False)
    pump(pair.client_transport, pair.server_transport)
    client_dlv = pair.receiver.current
    assert client_dlv is not None and client_dlv.tag == "7"
    client_dlv.update(proton.Delivery.ACCEPTED)
    client_dlv.settle()
    list(drain(collector))
    pump(pair.client_transport, pair.server_transport)
    settled = [
        (e.delivery.tag, e.delivery.remote_state, e.delivery.settled) for e in drain(collector) if e.type == Event.DELIVERY
    ]
    assert settled == [("7", proton.Delivery.ACCEPTED, True)]


def test_credit_is_nothing_once_the_link_is_closed_here() -> None:
    pair = LinkedPair(Collector(), "closed", credit=3)
    outgoing = Outgoing(pair.sender)
    assert outgoing.credit == 3
    pair.sender.close()
    assert pair.sender.credit == 3  # proton still counts the peer's credit
    assert outgoing.credit == 0
