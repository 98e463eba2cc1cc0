"""The reactor's global handler, minus the per-message events it has nothing to do for.

The reactor hands every event to the application's handler and then to its global handler,
which a Container sets up to look for the connection's outbound-connect overrides and then hand
the event to proton's I/O handler. Neither does anything with a delivery update or a link's
credit, and those are the events a message costs: one disposition per consumed message, one per
published message, and a flow every few. Walking them through that chain creates a connection
wrapper and does several failed attribute lookups per event. :class:`SkipMessageEvents` passes
every other event on unchanged; ``tests/unit/test_global_handler.py`` pins that proton's I/O
handler has no method for the two it skips.
"""

from __future__ import annotations

from typing import Any

from proton import Event, Handler

SKIPPED = frozenset({Event.DELIVERY.method, Event.LINK_FLOW.method})
"""Handler method names of the events not passed on."""


class SkipMessageEvents(Handler):
    """Global handler: ``base`` (the Container's own global handler) gets every event but those
    named in :data:`SKIPPED`."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def on_delivery(self, event: Any) -> None:
        """Nothing for the I/O handler to do."""

    def on_link_flow(self, event: Any) -> None:
        """Nothing for the I/O handler to do."""

    def on_unhandled(self, method: str, event: Any) -> None:
        """Every other event: on to ``base``, as the reactor would have dispatched it."""
        event.dispatch(self.base)
