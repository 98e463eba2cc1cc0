"""Proton's events, from the engine loop's collector to the front end's handler.

Every connection of the loop reports to one :class:`EventCollector`. :meth:`EventPump.drain`
takes what is queued there, oldest first, and:

* TRANSPORT (the engine has output, or room for input) marks the connection's socket for the
  flush at the end of the loop's pass; the handler never sees it;
* TRANSPORT_CLOSED goes to the handler (``on_transport_closed``: the connection is gone), then
  to the socket, which closes;
* any other event goes to the handler, as ``proton.reactor.Container`` dispatches it
  (``event.dispatch(handler)``: the handler's ``on_<event>`` method, else its ``on_unhandled``),
  except that events the handler has no method for (and no ``on_unhandled`` of its own) are not
  built at all.

The events a message costs take a short cut (:class:`MessageEvent`). ``Collector.peek`` builds a
``proton.Event`` for each event, and that builds a wrapper for the event's delivery, link,
session, connection and transport (a Python object and a record lookup each, and for a delivery
two disposition objects), most of which nobody reads: profiled, it was about a quarter of the
loop's time while consuming (one DELIVERY event per acknowledgement) and an eighth while
publishing. For DELIVERY and LINK_FLOW the pump reads the event's type and objects through
Proton-C's C API as python-qpid-proton binds it (the ``cproton`` module it is built on:
``pn_collector_peek``, ``pn_event_type``, ``pn_event_link``, ``pn_event_delivery``,
``pn_event_transport``, ``pn_collector_pop``; C functions of Proton's public API since its first
releases) and wraps just the link and the delivery with proton's public ``Link.wrap`` and
``Delivery.wrap``. It does so only for a handler with no child handlers (``Handler.handlers``),
which the short cut would skip; tests/unit/test_proton_events.py checks that both ways hand the
handler the same objects, and tests/unit/test_no_proton_internals.py that no other module uses
``cproton`` and this one only these functions.

A run of DELIVERY events (TRANSPORT events among them do not end it: the handler never sees
those) ends with a call of the handler's ``on_deliveries_done()``, when it has one, before the
next event of another type is dispatched (and before :meth:`EventPump.drain` returns): a
handler may keep what a run's events decided (a consumer's acknowledgements, which come many to
a frame) and apply it there at once, with every other event still in its order.

A handler method that raises is logged and the next event goes on: one event's failure must not
end the loop and with it every other client (the front end's client-driven methods also close
the failing connection: connectors.amqp.handler ``_contained``).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any, Protocol

import cproton
from proton import Connection, Delivery, Event, EventType, Handler, Link, Session, Transport

log = logging.getLogger(__name__)

_peek = cproton.pn_collector_peek
_pop = cproton.pn_collector_pop
_isnull = cproton.isnull
_event_type = cproton.pn_event_type
_event_link = cproton.pn_event_link
_event_delivery = cproton.pn_event_delivery
_event_transport = cproton.pn_event_transport
_incref = cproton.pn_incref
_decref = cproton.pn_decref
_readable = cproton.pn_delivery_readable
_partial = cproton.pn_delivery_partial
_pending = cproton.pn_delivery_pending
_remote_state = cproton.pn_delivery_remote_state
_update = cproton.pn_delivery_update
_settle = cproton.pn_delivery_settle
_settled = cproton.pn_delivery_settled
_tag = cproton.pn_delivery_tag
_PN_ACCEPTED = cproton.PN_ACCEPTED
_PN_DELIVERY = cproton.PN_DELIVERY
_PN_LINK_FLOW = cproton.PN_LINK_FLOW
_PN_TRANSPORT = cproton.PN_TRANSPORT
_PN_TRANSPORT_CLOSED = cproton.PN_TRANSPORT_CLOSED


def c_object(wrapper: Link) -> Hashable:
    """The C object a proton wrapper (``Link``, ``Connection``, ...) wraps, as a dict key: a cffi
    pointer, equal and hashed by address in C. Two wrappers of one object give equal keys, as
    the wrappers themselves are equal; proton's ``Wrapper.__hash__`` gets there through two casts
    in Python, which profiled at ~2 us per lookup on the publish path. Read from the ``_impl``
    attribute every proton wrapper keeps it in."""
    return wrapper._impl


class EventCollector:
    """A proton collector whose C object we made (``cproton.pn_collector``), so the pump can read
    its events through the C API. It is what ``proton.Collector`` is to proton: ``Connection.collect``
    takes it (it reads the ``_impl`` attribute, as of any Collector), and :meth:`peek` /
    :meth:`pop` work as ``proton.Collector``'s do."""

    def __init__(self) -> None:
        self._impl = cproton.pn_collector()

    def peek(self) -> Event | None:
        """The oldest event as a ``proton.Event``, or None."""
        return Event.wrap(_peek(self._impl))

    def pop(self) -> None:
        """Drop the oldest event."""
        _pop(self._impl)

    def __del__(self) -> None:
        cproton.pn_collector_free(self._impl)


class Transfer:
    """The delivery of a DELIVERY event as the message path reads and settles it, through
    Proton-C's C API (``pn_delivery_readable``, ``_partial``, ``_pending``, ``_remote_state``,
    ``_settled``, ``_tag``, ``_update``, ``_settle``): what ``proton.Delivery`` does for these,
    without the wrapper (a record lookup, an attribute dict and two disposition objects per
    message, and three conversions of empty disposition fields on each ``update``; profiled,
    about a fifth of the loop's time while publishing). A publish is read and accepted through
    it, a consumer's acknowledgement judged and settled. It holds a reference on the C object,
    as proton's wrapper does, so it stays valid while a commit is pending; :attr:`delivery` is
    proton's wrapper for everything else (rejections with a condition, modified and rejected
    outcomes' fields, transactions, oversized transfers).

    Like any proton object it must be touched, and dropped, on the loop's thread only."""

    __slots__ = ("_impl", "_delivery")

    def __init__(self, impl: Any) -> None:  # Any: a pn_delivery_t, as cproton (no type stubs) gives it
        _incref(impl)
        self._impl = impl
        self._delivery: Delivery | None = None

    def __del__(self) -> None:
        _decref(self._impl)

    @property
    def readable(self) -> bool:
        """The link's current delivery, with data to read (``Delivery.readable``)."""
        return bool(_readable(self._impl))

    @property
    def partial(self) -> bool:
        """More transfer frames of it are to come (``Delivery.partial``)."""
        return bool(_partial(self._impl))

    @property
    def pending(self) -> int:
        """Bytes of it received and not read yet (``Delivery.pending``)."""
        return int(_pending(self._impl))

    @property
    def remote_state(self) -> int:
        """The type code of the state the peer sent with it, 0 for none (``Delivery.remote_state``)."""
        return int(_remote_state(self._impl))

    @property
    def settled(self) -> bool:
        """The peer settled it (``Delivery.settled``)."""
        return bool(_settled(self._impl))

    @property
    def tag(self) -> str:
        """Its delivery-tag (``Delivery.tag``)."""
        return str(_tag(self._impl))

    def accept(self) -> None:
        """Settle it as accepted (``update(Delivery.ACCEPTED)`` then ``settle()``; no outcome
        fields, so none to convert)."""
        _update(self._impl, _PN_ACCEPTED)
        _settle(self._impl)

    def settle(self) -> None:
        """Settle it locally (``Delivery.settle``)."""
        _settle(self._impl)

    @property
    def delivery(self) -> Delivery:
        """Proton's wrapper of the same delivery (made once, when first asked)."""
        if self._delivery is None:
            self._delivery = Delivery.wrap(self._impl)
        return self._delivery


class DeliveryTransfer:
    """:class:`Transfer`'s interface over a ``proton.Delivery`` (events proton built: a handler
    with child handlers, which the short cut does not serve)."""

    __slots__ = ("delivery",)

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery

    @property
    def readable(self) -> bool:
        """See :attr:`Transfer.readable`."""
        return bool(self.delivery.readable)

    @property
    def partial(self) -> bool:
        """See :attr:`Transfer.partial`."""
        return bool(self.delivery.partial)

    @property
    def pending(self) -> int:
        """See :attr:`Transfer.pending`."""
        return int(self.delivery.pending)

    @property
    def remote_state(self) -> int:
        """See :attr:`Transfer.remote_state`."""
        return int(self.delivery.remote_state)

    @property
    def settled(self) -> bool:
        """See :attr:`Transfer.settled`."""
        return bool(self.delivery.settled)

    @property
    def tag(self) -> str:
        """See :attr:`Transfer.tag`."""
        return str(self.delivery.tag)

    def accept(self) -> None:
        """See :meth:`Transfer.accept`."""
        self.delivery.update(Delivery.ACCEPTED)
        self.delivery.settle()

    def settle(self) -> None:
        """See :meth:`Transfer.settle`."""
        self.delivery.settle()


# ``event``: a proton.Event, whose link proton types as Optional for every event type, or a MessageEvent;
# this path takes no checks to narrow the first.
def link_key_of(event: Any) -> Hashable:  # Any: see above
    """The event's link as a dict key (:func:`c_object`), read without wrapping the link on the
    short cut."""
    if isinstance(event, MessageEvent):
        return event.link_key
    return c_object(event.link)


def transfer_of(event: Any) -> Transfer | DeliveryTransfer:  # Any: as link_key_of (proton.Event's delivery is Optional)
    """The event's delivery as :class:`Transfer` (short cut) or :class:`DeliveryTransfer`."""
    if isinstance(event, MessageEvent):
        return event.transfer
    return DeliveryTransfer(event.delivery)


class MessageEvent:
    """What the handler's ``on_delivery`` / ``on_link_flow`` get on the short cut: the event's
    link and (DELIVERY) delivery, wrapped as ``proton.Event`` would wrap them; its connection,
    session and transport are the link's (read when asked). Each is wrapped when first read: a
    publish reads the delivery as a :attr:`transfer` instead, and a handler that keeps its
    attached links' wrappers finds the link by :attr:`link_key`."""

    __slots__ = ("link_key", "_link", "_impl", "_delivery")

    def __init__(self, link_impl: Any, impl: Any) -> None:  # Any: pn_link_t, pn_delivery_t from cproton
        self.link_key = link_impl  # the pn_link_t: a key as c_object gives it
        self._link: Link | None = None
        self._impl = impl  # the pn_delivery_t, or None (LINK_FLOW)
        self._delivery: Delivery | None = None

    @property
    def link(self) -> Link:
        """The event's link as ``proton.Link`` (a Sender or Receiver)."""
        if self._link is None:
            self._link = Link.wrap(self.link_key)
        return self._link

    @property
    def delivery(self) -> Delivery | None:
        """The event's delivery as ``proton.Delivery`` (None for LINK_FLOW)."""
        if self._delivery is None and self._impl is not None:
            self._delivery = Delivery.wrap(self._impl)
        return self._delivery

    @property
    def transfer(self) -> Transfer:
        """The event's delivery as a :class:`Transfer` (DELIVERY events only)."""
        return Transfer(self._impl)

    @property
    def session(self) -> Session:
        """The link's session."""
        return self.link.session

    @property
    def connection(self) -> Connection:
        """The link's connection."""
        return self.link.connection

    @property
    def transport(self) -> Transport | None:
        """The link's connection's transport."""
        return self.link.connection.transport


class Sockets(Protocol):
    """What the pump tells the loop about a connection's transport."""

    def transport_changed(self, transport: Transport) -> None:
        """The transport may have output: flush its socket at the end of the pass."""

    def transport_closed(self, transport: Transport) -> None:
        """Both ends of the transport are closed: close its socket."""


def _ignored_types(handler: Handler) -> frozenset[int]:
    """Event type numbers ``handler`` does nothing with: no method of its own and the base
    ``on_unhandled`` (transport events aside: the pump acts on those itself)."""
    if getattr(type(handler), "on_unhandled", Handler.on_unhandled) is not Handler.on_unhandled:
        return frozenset()
    if getattr(handler, "handlers", None):
        return frozenset()
    own = (_PN_TRANSPORT, _PN_TRANSPORT_CLOSED)
    return frozenset(
        number for number, kind in EventType.TYPES.items()
        if isinstance(number, int) and number not in own and not hasattr(handler, kind.method)
    )


class EventPump:
    """Drains a collector into a handler (see the module docstring)."""

    def __init__(self, collector: EventCollector, handler: Handler, sockets: Sockets) -> None:
        """Dispatch what ``collector`` queues to ``handler``; transport events to ``sockets``."""
        self._collector = collector
        self._impl = collector._impl
        self._handler = handler
        self._sockets = sockets
        plain = not getattr(handler, "handlers", None)
        self._on_delivery = getattr(handler, "on_delivery", None) if plain else None
        self._on_link_flow = getattr(handler, "on_link_flow", None) if plain else None
        self._run_done = getattr(handler, "on_deliveries_done", None)
        self._ignored = _ignored_types(handler)

    def drain(self) -> None:
        """Dispatch every queued event, including those the handler's actions queue meanwhile."""
        impl = self._impl
        on_delivery = self._on_delivery
        on_link_flow = self._on_link_flow
        run_done = self._run_done
        ignored = self._ignored
        in_run = False  # the last event dispatched was a DELIVERY (module docstring)
        while True:
            raw = _peek(impl)
            kind = -1 if _isnull(raw) else _event_type(raw)
            if in_run and kind != _PN_DELIVERY and kind != _PN_TRANSPORT:  # TRANSPORT: the sockets' only
                in_run = False
                try:
                    run_done()  # type: ignore[misc]  # in_run is set only when there is one
                except Exception:
                    log.exception("handling the end of a run of proton delivery events failed")
                continue  # what it did may have queued events
            if kind < 0:
                return
            try:
                if kind == _PN_DELIVERY:
                    in_run = run_done is not None
                if kind == _PN_DELIVERY and on_delivery is not None:
                    on_delivery(MessageEvent(_event_link(raw), _event_delivery(raw)))
                elif kind == _PN_LINK_FLOW and on_link_flow is not None:
                    on_link_flow(MessageEvent(_event_link(raw), None))
                elif kind == _PN_TRANSPORT:
                    transport = Transport.wrap(_event_transport(raw))
                    if transport is not None:  # a TRANSPORT event always has one
                        self._sockets.transport_changed(transport)
                elif kind not in ignored:
                    self._dispatch(raw, kind)
            except Exception:
                log.exception("handling proton event %d failed", kind)
            _pop(impl)

    def _dispatch(self, raw: Any, kind: int) -> None:  # Any: a pn_event_t from cproton
        event = Event.wrap(raw)
        try:
            event.dispatch(self._handler)
        finally:
            if kind == _PN_TRANSPORT_CLOSED:  # the socket closes whatever the handler did
                self._sockets.transport_closed(event.transport)
