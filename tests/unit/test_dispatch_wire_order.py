"""The Dispatcher's sends on real proton engines (in memory, no sockets): the order it applies
them in, and the transport events that order costs.

Proton queues a transport event (and the reactor an output pass: flush, selectable update) for
each change to a connection unless the last queued event was already that connection's. A
round-robin pass over consumers on separate connections that sent in decision order would cost
one such pass per message; sent link by link it costs one per connection.
"""

from __future__ import annotations

from proton import Collector, Event, Message

from connectors.amqp.dispatcher import Dispatcher
from connectors.amqp.generations import GenerationTables
from sharedsub.runtime.tailer import Row
from tests.proton_pair import LinkedPair, drain


def test_a_pass_over_consumers_on_separate_connections_costs_one_transport_event_each() -> None:
    collector = Collector()
    pairs = [LinkedPair(collector, f"c{i}", credit=10) for i in range(3)]
    list(drain(collector))
    d = Dispatcher(lambda _request: None, lambda _k, _n: None)
    d.open("k", GenerationTables("k-table", None, "k-dead"))
    for pair in pairs:
        d.add_consumer("k", pair.sender)
    d.offer("k", [Row("t", seq, Message(body=seq).encode()) for seq in range(1, 13)])
    transport_events = [e for e in drain(collector) if e.type == Event.TRANSPORT]
    assert len(transport_events) == len(pairs)
    # Still round-robin, each link's rows in seq order.
    assert [pair.received() for pair in pairs] == [[1, 4, 7, 10], [2, 5, 8, 11], [3, 6, 9, 12]]
