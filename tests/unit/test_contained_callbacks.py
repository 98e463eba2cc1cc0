"""A failing client-driven callback of the front end ends at most its connection (handler._contained)."""

from __future__ import annotations

from typing import Any

import proton
from proton import Endpoint

from connectors.amqp.handler import _contained


class _Event:
    def __init__(self, connection: proton.Connection | None) -> None:
        self.connection = connection


class _Handler:
    calls = 0

    @_contained
    def on_delivery(self, event: Any) -> None:
        self.calls += 1
        raise AttributeError("a bug reached by one client's frame")


def test_the_exception_stays_inside_and_the_connection_is_closed_with_internal_error() -> None:
    conn = proton.Connection()
    conn.open()
    handler = _Handler()
    handler.on_delivery(_Event(conn))  # must not raise
    assert handler.calls == 1
    assert conn.state & Endpoint.LOCAL_CLOSED
    assert conn.condition.name == "amqp:internal-error"
    assert "a bug reached by one client's frame" in conn.condition.description


def test_an_event_without_a_connection_is_only_logged() -> None:
    handler = _Handler()
    handler.on_delivery(_Event(None))
    assert handler.calls == 1
