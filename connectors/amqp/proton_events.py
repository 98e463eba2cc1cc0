"""Proton's events, from the engine loop's collector to the front end's handler.

Every connection of the loop reports to one ``proton.Collector``. :meth:`EventPump.drain` takes
what is queued there, oldest first, and:

* TRANSPORT (the engine has output, or room for input) marks the connection's socket for the
  flush at the end of the loop's pass; the handler never sees it;
* TRANSPORT_CLOSED goes to the handler (``on_transport_closed``: the connection is gone), then
  to the socket, which closes;
* any other event goes to the handler, as ``proton.reactor.Container`` dispatches it
  (``event.dispatch(handler)``: the handler's ``on_<event>`` method, else its ``on_unhandled``).

A handler method that raises is logged and the next event goes on: one event's failure must not
end the loop and with it every other client (the front end's client-driven methods also close
the failing connection: connectors.amqp.handler ``_contained``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from proton import Collector, Event, Transport

log = logging.getLogger(__name__)


class Sockets(Protocol):
    """What the pump tells the loop about a connection's transport."""

    def transport_changed(self, transport: Transport) -> None:
        """The transport may have output: flush its socket at the end of the pass."""

    def transport_closed(self, transport: Transport) -> None:
        """Both ends of the transport are closed: close its socket."""


class EventPump:
    """Drains a collector into a handler (see the module docstring)."""

    def __init__(self, collector: Collector, handler: Any, sockets: Sockets) -> None:
        """Dispatch what ``collector`` queues to ``handler``; transport events to ``sockets``."""
        self._collector = collector
        self._handler = handler
        self._sockets = sockets

    def drain(self) -> None:
        """Dispatch every queued event, including those the handler's actions queue meanwhile."""
        collector = self._collector
        handler = self._handler
        sockets = self._sockets
        transport_event = Event.TRANSPORT
        closed_event = Event.TRANSPORT_CLOSED
        while True:
            event = collector.peek()
            if event is None:
                return
            kind = event.type
            try:
                if kind is transport_event:
                    sockets.transport_changed(event.transport)
                else:
                    event.dispatch(handler)
            except Exception:
                log.exception("handling %s failed", kind)
            if kind is closed_event:
                try:  # the socket closes whatever the handler did
                    sockets.transport_closed(event.transport)
                except Exception:
                    log.exception("closing the socket of a closed transport failed")
            collector.pop()
