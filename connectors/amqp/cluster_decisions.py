"""The cluster side of consumer attach and detach decisions (several members share the data dir:
docs/design.md §8).

With several members, a decision counts the consumers the other members have and decides on
the catalog's latest records, not only on what this front end holds: before an attach or a
deletion, the store is asked (:meth:`ClusterDecisions.look_then_decide`,
:meth:`ClusterDecisions.count_then`) and the records it shows are merged into the catalog
(connectors/amqp/subscription_catalog.py) first. An unshared durable subscription has at most one
consumer in the cluster: it is claimed across the members before its consumer attaches here
(:meth:`ClusterDecisions.claim_then`; sharedsub.runtime.cluster.member_claims) and given up when
its last consumer here goes. With one member (no :class:`OtherMembers`) every path here decides
at once, as a lone front end does.

Reactor thread only. The continuations handed to :class:`OtherMembers` hold the link waiting for
the answer: they never leave the reactor thread (connectors/amqp/cluster_port.py keeps them
under tokens, connectors/amqp/wire/reactor_thread.py states the rule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import proton
from proton import Endpoint

from connectors.amqp.refusal import refuse
from connectors.amqp.subscription_catalog import SubscriptionCatalog
from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.cluster.member_claims import Held
from sharedsub.runtime.cluster.peer_consumers import Seen

NOT_COUNTED = "could not count the consumers on the cluster's other members (the store did not answer)"
"""Why a decision that needs the other members' consumers was not taken."""


class OtherMembers(Protocol):
    """What the other members of the data dir hold (docs/design.md §8), asked off the reactor
    thread; every answer comes back on the reactor thread, and what waits for it (the link)
    never leaves that thread (connectors/amqp/cluster_port.py, ClusterPort is the one)."""

    def look(self, keys: list[str], then: Callable[[Seen | None], None]) -> None:
        """``then(Seen)``: the catalog's latest records of ``keys`` and their consumers on the
        other live members; ``then(None)`` when the store did not answer."""
        ...

    def claim_subscription(self, key: str, then: Callable[[Held | None], None]) -> None:
        """Claim ``key`` for this member's one consumer of an unshared durable subscription:
        ``then(None)`` when it is this member's."""
        ...

    def release_subscription(self, key: str) -> None:
        """Give the claim of ``key`` up."""
        ...


Decide = Callable[[Seen | None, bool], None]
"""``decide(seen, held)``: decide an attach again (connectors/amqp/attaches.py ``open_consumer``)
with what the store said (``seen``) and whether another member holds its claim (``held``)."""


class ClusterDecisions:
    """The other members' part in this front end's attach and detach decisions (module docstring)."""

    def __init__(self, catalog: SubscriptionCatalog, consumers: Callable[[str], int], others: OtherMembers | None) -> None:
        """``consumers(key)``: the consumer links of ``key`` attached here; ``others``: the other
        members of the data dir (None: this front end is alone)."""
        self._catalog = catalog
        self._consumers = consumers
        self._others = others
        self._claimed: set[str] = set()  # keys claimed here (unshared durable, a consumer attached)

    @property
    def several(self) -> bool:
        """Several members: attach and detach decisions count the others' consumers too."""
        return self._others is not None

    def counts_elsewhere(self, rec: SubscriptionRecord) -> bool:
        """Whether ending ``rec`` waits for the other members' consumers to be counted (several
        members, a shared subscription: theirs keep it too)."""
        return self._others is not None and rec.identity.shared

    # ------------------------------------------------------------------ attach

    def look_then_decide(self, link: proton.Sender, keys: list[str], decide: Callable[[Seen], None]) -> None:
        """Ask the store about ``keys`` (the subscriptions an attach names), merge what it shows,
        then ``decide(seen)``; the attach is refused when the store did not answer, and dropped
        when its client gave up meanwhile. Several members only."""
        others = self._others
        assert others is not None, "looked with one member"

        def looked(seen: Seen | None) -> None:  # reactor thread
            if not link.state & Endpoint.LOCAL_UNINIT or link.state & Endpoint.REMOTE_CLOSED:
                return  # the client gave up meanwhile
            if seen is None:
                refuse(link, AmqpCondition.INTERNAL_ERROR, f"{NOT_COUNTED}; attach again")
                return
            self._catalog.merge(list(seen.records.values()))
            decide(seen)

        others.look(keys, looked)

    def claim_then(
        self,
        link: proton.Sender,
        rec: SubscriptionRecord,
        seen: Seen | None,
        then: Callable[[], None],
        decide: Decide,
    ) -> None:
        """Run ``then()``, first claiming ``rec`` across the members when it is an unshared
        durable subscription (at most one consumer in the cluster, runtime/cluster/member_claims).
        When the subscription changed meanwhile, or another member holds it, the attach is
        decided again with ``decide``."""
        others = self._others
        if others is None or rec.identity.shared or not rec.identity.durable:
            then()
            return
        known = self._catalog.records.get(rec.key) is rec  # its consumer joins it (else it is being created)

        def claimed(held: Held | None) -> None:  # reactor thread
            gone = not link.state & Endpoint.LOCAL_UNINIT or link.state & Endpoint.REMOTE_CLOSED
            if gone or (known and self._catalog.records.get(rec.key) is not rec):
                if held is None and self._consumers(rec.key) == 0:
                    others.release_subscription(rec.key)
                if not gone:
                    decide(None, False)  # the subscription changed meanwhile: decide again
                return
            if held is not None and held.error is not None:
                refuse(link, AmqpCondition.INTERNAL_ERROR, held.describe(f"subscription {rec.identity.name!r}"))
            elif held is not None:
                looked = seen if seen is not None else Seen({}, {})
                decide(looked.with_one_more(rec.key), True)  # refused as one front end refuses it
            else:
                self._claimed.add(rec.key)
                then()

        others.claim_subscription(rec.key, claimed)

    # ------------------------------------------------------------------ detach

    def release_if_last(self, key: str, remaining: int) -> None:
        """A consumer of ``key`` went, ``remaining`` are left here: with none, give up the claim
        of ``key`` if this member holds it."""
        if remaining == 0 and key in self._claimed and self._others is not None:
            self._claimed.discard(key)
            self._others.release_subscription(key)

    def count_then(self, rec: SubscriptionRecord, then: Callable[[SubscriptionRecord | None, Seen | None], None]) -> None:
        """Ask the store about ``rec`` and merge what it shows, then ``then(current, seen)``:
        ``current`` is the current record of ``rec``'s generation (None when another member
        deleted or replaced it meanwhile), ``seen`` the store's answer (None: it did not answer).
        Several members only."""
        others = self._others
        assert others is not None, "counted with one member"

        def counted(seen: Seen | None) -> None:  # reactor thread
            if seen is not None:
                self._catalog.merge(list(seen.records.values()))
            then(self._catalog.current(rec), seen)

        others.look([rec.key], counted)
