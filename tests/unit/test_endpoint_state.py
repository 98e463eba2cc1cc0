"""EndpointState on real proton endpoints (no network: proton's engine objects alone)."""

from __future__ import annotations

import proton

from connectors.amqp.endpoint_state import ConsumerLink, EndpointState, PublisherLink
from connectors.amqp.wire.proton_events import c_object


def _links() -> tuple[proton.Connection, proton.Sender, proton.Receiver]:
    conn = proton.Connection()
    ssn = conn.session()
    return conn, ssn.sender("out"), ssn.receiver("in")


def test_states_are_kept_by_endpoint_and_dropped_with_it() -> None:
    state = EndpointState()
    conn, out, inn = _links()
    state.connection_opened(conn)
    cid = state.connection_id(conn)
    assert len(cid) == 12 and state.connection_id(conn) == cid
    consumer, publisher = ConsumerLink("k", "tbl", 1, cid), PublisherLink(None, "c", None)
    state.set_link(out, consumer)
    state.set_link(inn, publisher)
    # a second wrapper of the same C object finds the same state
    assert state.consumer(proton.Link.wrap(out._impl)) is consumer
    assert state.attached(c_object(inn)) == (inn, publisher) and state.consumer(inn) is None
    assert state.attached(c_object(out)) == (out, consumer)  # a consumer, not a publisher
    assert list(state.publishers()) == [publisher]
    # by the C object (what the event pump hands over): the wrapper kept at attach, and its state
    found = state.attached(c_object(proton.Link.wrap(inn._impl)))
    assert found is not None and found[0] is inn and found[1] is publisher
    assert state.drop_link(out) is consumer and state.consumer(out) is None
    assert state.attached(c_object(out)) is None
    state.drop_connection(conn)
    assert state.sizes() == {"links": 0, "connections": 0, "oversized": 0}
    assert state.connection_id(conn) == ""


def test_a_link_of_a_connection_already_gone_is_not_held() -> None:
    state = EndpointState()
    conn, out, _ = _links()
    state.connection_opened(conn)
    state.drop_connection(conn)
    state.set_link(out, ConsumerLink("k", "tbl", 1, ""))
    assert state.sizes()["links"] == 0


def test_oversized_transfers_are_forgotten_when_refused_or_with_their_link() -> None:
    state = EndpointState()
    conn, out, inn = _links()
    state.connection_opened(conn)
    first, second = out.delivery(b"1"), out.delivery(b"2")
    state.mark_oversized(first)
    state.mark_oversized(second)
    assert state.oversized(first) and state.sizes()["oversized"] == 2
    state.done_oversized(first)
    assert not state.oversized(first)
    state.drop_link(inn)  # another link: the transfer stays
    assert state.oversized(second)
    state.drop_link(out)
    assert state.sizes()["oversized"] == 0
