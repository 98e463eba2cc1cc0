"""What the front end keeps about proton's endpoints, in typed tables beside them.

proton's Python objects are wrappers: equal, and hashed, by the C object they wrap, so they key
a dict. Links are keyed by that C object itself (connectors.amqp.wire.proton_events ``c_object``),
with the wrapper made at attach kept beside the state: a link is looked up once per message, and
a wrapper's hash is two casts in Python where a cffi pointer's is one C call. Holding a wrapper
keeps its C object alive, so every entry is dropped when its endpoint
goes (link detached or closed, session ended, connection closed or lost); the handler calls
:meth:`EndpointState.drop_link` and :meth:`EndpointState.drop_connection` at those points, and
:meth:`EndpointState.sizes` lets tests check that nothing stays behind.

Reactor thread only.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Hashable, Iterator

import proton

from connectors.amqp.wire.proton_events import c_object
from sharedsub.core import addressing
from sharedsub.core.publish.commit_pace import PublisherPace
from sharedsub.core.security.permissions import Policy


@dataclasses.dataclass(slots=True, eq=False)
class PublisherLink:
    """State of a link on which a client publishes (our receiver). Hashed by identity: one per
    attached link, it keys the handler's per-link counts."""

    address: addressing.Address | None  # None: anonymous relay, topic from properties.to
    container: str
    user: str | None  # who authenticated on the link's connection (None: anonymous)
    # The policy ``address`` was authorized under: a message is checked again only when the
    # permissions file changed since (an anonymous relay checks each message's topic).
    authorized_under: Policy | None = None
    # Its messages in the committer and when it was last settled: whether it sends one message at
    # a time and waits for each (sharedsub.core.publish.commit_pace).
    pace: PublisherPace = dataclasses.field(default_factory=PublisherPace)


@dataclasses.dataclass(slots=True)
class ConsumerLink:
    """State of a consumer link of a subscription (our sender)."""

    key: str
    table: str
    generation: int
    connection: str  # the connection's id (:meth:`EndpointState.connection_id`)


class EndpointState:
    """Link states, connection ids and oversized transfers in progress (see the module docstring)."""

    def __init__(self) -> None:
        self._links: dict[Hashable, tuple[proton.Link, PublisherLink | ConsumerLink]] = {}
        self._connection_ids: dict[proton.Connection, str] = {}
        self._oversized: set[proton.Delivery] = set()

    # links

    def set_link(self, link: proton.Link, state: PublisherLink | ConsumerLink) -> None:
        """Record what ``link`` is (once it is attached); nothing when its connection is gone
        already (an attach answered after the connection was lost must not be held)."""
        if link.connection in self._connection_ids:
            self._links[c_object(link)] = (link, state)

    def attached(self, key: Hashable) -> tuple[proton.Link, PublisherLink | ConsumerLink] | None:
        """The wrapper kept of the attached link whose C object is ``key`` (``c_object``,
        proton_events ``link_key_of``) and its state; None for any other link."""
        return self._links.get(key)

    def consumer(self, link: proton.Link) -> ConsumerLink | None:
        """``link``'s consumer state; None when it is not an attached consumer link."""
        found = self._links.get(c_object(link))
        return found[1] if found is not None and isinstance(found[1], ConsumerLink) else None

    def publishers(self) -> Iterator[PublisherLink]:
        """Every attached publisher link's state."""
        return (s for _link, s in self._links.values() if isinstance(s, PublisherLink))

    def drop_link(self, link: proton.Link) -> PublisherLink | ConsumerLink | None:
        """Forget ``link`` (and its oversized transfer, if one was in progress); its state, if any."""
        if self._oversized:
            self._oversized = {d for d in self._oversized if d.link != link}
        found = self._links.pop(c_object(link), None)
        return found[1] if found is not None else None

    # connections

    def connection_opened(self, conn: proton.Connection) -> None:
        """``conn`` was accepted: its links may be recorded until :meth:`drop_connection`."""
        self._connection_ids.setdefault(conn, uuid.uuid4().hex[:12])

    def connection_id(self, conn: proton.Connection) -> str:
        """A short random id of ``conn`` for the catalog's link events, the same for its lifetime
        ("" once the connection is gone)."""
        return self._connection_ids.get(conn, "")

    def drop_connection(self, conn: proton.Connection) -> None:
        """Forget ``conn``, its links and their transfers."""
        self._connection_ids.pop(conn, None)
        for link in [lnk for lnk, _state in self._links.values() if lnk.connection == conn]:
            self.drop_link(link)

    # oversized transfers

    def any_oversized(self) -> bool:
        """Some transfer is being dropped as oversized (:meth:`oversized` has anything to find)."""
        return bool(self._oversized)

    def oversized(self, dlv: proton.Delivery) -> bool:
        """``dlv`` was found larger than the limit: its bytes are being read and dropped."""
        # Hashing a delivery is a call into proton: skip it while none is oversized (the rule).
        return bool(self._oversized) and dlv in self._oversized

    def mark_oversized(self, dlv: proton.Delivery) -> None:
        """Remember that ``dlv`` is over the limit until :meth:`done_oversized`."""
        self._oversized.add(dlv)

    def done_oversized(self, dlv: proton.Delivery) -> None:
        """``dlv`` was refused: forget it."""
        self._oversized.discard(dlv)

    def describe(self, user_of: Callable[[proton.Connection], str | None]) -> list[dict[str, object]]:
        """Each recorded connection with its attached links, JSON-ready (the console's
        connections page): ``id, container, user, links: [{name, role, address,
        subscription, credit, unsettled}]``; ``user_of`` names a connection's user."""
        links: dict[proton.Connection, list[dict[str, object]]] = {}
        for link, state in self._links.values():
            if isinstance(state, PublisherLink):
                described: dict[str, object] = {
                    "role": "publisher",
                    "address": state.address.topic if state.address is not None else None,
                    "subscription": None,
                }
            else:
                described = {"role": "consumer", "address": link.source.address, "subscription": state.key}
            described |= {"name": link.name, "credit": link.credit, "unsettled": link.unsettled}
            links.setdefault(link.connection, []).append(described)
        out: list[dict[str, object]] = []
        for conn, ident in self._connection_ids.items():
            out.append(
                {
                    "id": ident,
                    "container": conn.remote_container or "",
                    "user": user_of(conn),
                    "links": sorted(links.get(conn, []), key=lambda d: str(d["name"])),
                }
            )
        return sorted(out, key=lambda d: (str(d["container"]), str(d["id"])))

    def sizes(self) -> dict[str, int]:
        """Entries held, per table (links, connections, oversized)."""
        return {"links": len(self._links), "connections": len(self._connection_ids), "oversized": len(self._oversized)}
