"""The consumer links the dispatcher sends on, named by ints.

The dispatch rules (sharedsub.core.delivery.dispatch) name consumers by ints; :class:`ConsumerLinks`
keeps what each int stands for in typed side tables, never as attributes on proton objects: a
subscription's links (:attr:`ConsumerLinks.by_key`, key -> consumer -> the link's
connectors/amqp/wire/outgoing.py ``Outgoing``), the consumer a link is (by its C object, as
connectors/amqp/wire/proton_events.py ``c_object`` reads it) and the container-id of each
consumer's connection (what its settlements are recorded under).

It holds proton objects: front end's thread only (connectors/amqp/tokens.py).
"""

from __future__ import annotations

import proton

from connectors.amqp.wire.outgoing import Outgoing
from connectors.amqp.wire.proton_events import c_object


class ConsumerLinks:
    """The consumer links of the subscriptions dispatched here (module docstring)."""

    __slots__ = ("by_key", "_consumer_of", "_containers", "_next")

    def __init__(self) -> None:
        # key -> consumer -> link; read as is on each dispatch event (the dispatcher's _handle).
        self.by_key: dict[str, dict[int, Outgoing]] = {}
        self._consumer_of: dict[object, tuple[str, int]] = {}
        self._containers: dict[int, str] = {}
        self._next = 0

    def open(self, key: str) -> None:
        """Subscription ``key`` may have consumer links (idempotent)."""
        self.by_key.setdefault(key, {})

    def add(self, key: str, link: proton.Link) -> tuple[int, Outgoing]:
        """Name ``link`` as a new consumer of ``key`` (opened before); return it and its link."""
        self._next += 1
        consumer = self._next
        outgoing = self.by_key[key][consumer] = Outgoing(link)
        self._consumer_of[c_object(link)] = (key, consumer)
        self._containers[consumer] = link.connection.remote_container or ""
        return consumer, outgoing

    def find(self, link: proton.Link) -> tuple[str, int, Outgoing | None] | None:
        """The subscription and consumer ``link`` is, and its link if ``key``'s links still have
        it; None for a link that is not a consumer here."""
        found = self._consumer_of.get(c_object(link))
        if found is None:
            return None
        key, consumer = found
        return key, consumer, self.by_key.get(key, {}).get(consumer)

    def remove(self, key: str, link: proton.Link) -> int | None:
        """``link`` is no consumer of ``key`` any more: return the consumer it was (None: it was
        none of ``key``'s). Its container-id stays until :meth:`forget_container`."""
        impl = c_object(link)
        found = self._consumer_of.get(impl)
        if found is None or found[0] != key:
            return None
        consumer = found[1]
        del self._consumer_of[impl]
        del self.by_key[key][consumer]
        return consumer

    def forget_container(self, consumer: int) -> None:
        """Drop ``consumer``'s container-id (once its last settlements are recorded)."""
        self._containers.pop(consumer, None)

    def drop(self, key: str) -> None:
        """Forget every consumer link of ``key``."""
        for consumer, outgoing in self.by_key.pop(key, {}).items():
            self._consumer_of.pop(c_object(outgoing.link), None)
            self._containers.pop(consumer, None)

    def container(self, consumer: int | None, containers: dict[int, str] | None = None) -> str:
        """The container-id of ``consumer``'s connection ("" for none); ``containers``: those of
        consumers that may be gone (a transaction's, kept when they settled in it)."""
        if consumer is None:
            return ""
        found = self._containers.get(consumer)
        if found is None and containers is not None:
            found = containers.get(consumer)
        return found or ""

    def container_of(self, consumer: int) -> str:
        """The container-id of live ``consumer``'s connection ("" if it is gone)."""
        return self._containers.get(consumer, "")
