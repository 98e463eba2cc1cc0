"""connectors.amqp.global_handler: what the reactor's global handler is spared, and that it is
spared nothing it acts on. Events come from real proton engines (in memory)."""

from __future__ import annotations

from typing import Any

import proton
from proton import Collector
from proton.handlers import IOHandler
from proton.reactor import Container

from connectors.amqp.global_handler import SKIPPED, SkipMessageEvents
from tests.proton_pair import LinkedPair, drain, pump


class _Recorder(proton.Handler):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_unhandled(self, method: str, *args: Any) -> None:
        self.seen.append(method)


def test_proton_io_handler_has_nothing_for_the_skipped_events() -> None:
    # Were proton to act on deliveries or credit in its I/O handler, skipping them would break it.
    for method in SKIPPED:
        assert not hasattr(IOHandler, method)
        assert not hasattr(type(Container().global_handler), method)
    assert SKIPPED == {"on_delivery", "on_link_flow"}


def test_every_other_event_reaches_the_base_handler() -> None:
    collector = Collector()
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
    base = _Recorder()
    skip = SkipMessageEvents(base)
    methods = []
    for event in drain(collector):
        methods.append(event.type.method)
        event.dispatch(skip)
    assert {"on_delivery", "on_link_flow", "on_connection_init", "on_transport"} <= set(methods)
    assert base.seen == [m for m in methods if m not in SKIPPED]
