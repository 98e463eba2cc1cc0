"""A consumer link as the dispatcher sends on it, through Proton-C's C API.

Sending a row through proton's Python layer (``Link.delivery(tag)``, ``Sender.send``,
``Link.advance``) builds a ``proton.Delivery`` wrapper per message (a record lookup, an attribute
dict and two disposition objects, freed again when the wrapper goes), which nobody reads: the
consumer's disposition comes back as a DELIVERY event that connectors/amqp/wire/proton_events.py reads
through the C API by its tag. Profiled while consuming, building and dropping those wrappers was
about an eighth of the loop's time. :class:`Outgoing` makes the same C calls proton's methods make
(``pn_delivery``, ``pn_link_send``, ``pn_link_advance``, ``pn_delivery_settle``, and
``pn_link_credit`` / ``pn_link_state`` for the credit) and no wrapper.

It takes the link's C object as connectors/amqp/wire/proton_events.py ``c_object`` reads it and keeps
the ``proton.Sender`` itself, whose reference keeps that object alive.
tests/unit/test_no_proton_internals.py lists the C functions this module may use;
tests/unit/test_outgoing.py checks that a peer receives what it sends as from proton's methods.

Like any proton object it must be touched on the loop's thread only.
"""

from __future__ import annotations

import cproton
from proton import Link, LinkException

from connectors.amqp.wire.proton_events import c_object

_new_delivery = cproton.pn_delivery
_link_send = cproton.pn_link_send
_link_advance = cproton.pn_link_advance
_link_credit = cproton.pn_link_credit
_link_state = cproton.pn_link_state
_settle = cproton.pn_delivery_settle
_LOCAL_ACTIVE = cproton.PN_LOCAL_ACTIVE


class Outgoing:
    """A sender link's credit and sends (see the module docstring)."""

    __slots__ = ("link", "_impl")

    def __init__(self, link: Link) -> None:
        """``link``: the ``proton.Sender`` (kept, and with it its C object)."""
        self.link = link
        self._impl = c_object(link)

    @property
    def credit(self) -> int:
        """What may be sent now: the link's credit while it is open locally, else nothing."""
        impl = self._impl
        return _link_credit(impl) if _link_state(impl) & _LOCAL_ACTIVE else 0

    def send(self, tag: str, message: bytes, settle: bool) -> None:
        """Send one whole message as a new delivery tagged ``tag`` (``Link.delivery(tag)``,
        ``Sender.send(message)``, ``Link.advance()``), settled at once when ``settle`` (an
        at-most-once consumer).

        Raises:
            LinkException: proton refused the bytes (as ``Sender.stream`` raises).
        """
        impl = self._impl
        delivery = _new_delivery(impl, tag)
        sent = _link_send(impl, message)
        if sent < 0:
            raise LinkException(f"[{sent}]: sending a message of {len(message)} bytes failed")
        _link_advance(impl)
        if settle:
            _settle(delivery)
