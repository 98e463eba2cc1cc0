"""Consumer detaches, session ends and connection closes applied; subscriptions ended.

A consumer link going away is decided by the pure
:func:`~sharedsub.core.subscriptions.attach.decide_detach` and applied here: the subscription is
deleted, kept, or kept until its session or connection ends (its **scope**: :meth:`Detaches.scope_ended`
deletes it then, if no consumer came back). A deletion is answered only once the catalog commit
that records it is done, so an unsubscribe the client saw succeed never comes back after a
crash. With several members, a shared subscription is deleted only once the other members'
consumers are counted (connectors/amqp/cluster_decisions.py), and a non-durable one whose
consumers' member died is ended by :meth:`Detaches.end_unconsumed`. Every deletion, the admin
``unsubscribe`` and an attach's too, goes through :meth:`Detaches.delete`.

Reactor thread only (the scopes are proton sessions and connections: connectors/amqp/tokens.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import proton
from proton import Condition

from connectors.amqp.cluster_decisions import NOT_COUNTED, ClusterDecisions
from connectors.amqp.dispatcher import Dispatcher
from connectors.amqp.endpoint_state import EndpointState
from connectors.amqp.subscription_catalog import SubscriptionCatalog
from connectors.amqp.tokens import Continuation
from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.subscriptions import attach
from sharedsub.core.subscriptions.attach import DeleteSubscription, KeepSubscription, RefuseDelete
from sharedsub.runtime.cluster.peer_consumers import Seen
from sharedsub.runtime.tailer import Tailer

log = logging.getLogger(__name__)

_UNCOUNTED = f"{NOT_COUNTED}; the subscription is kept, try the unsubscribe again"

Reply = Callable[[bool, Condition | None], None]
"""``reply(closed, condition)``: answer a detach (closed or not, with a condition or none)."""


class Detaches:
    """Consumer links gone, scopes ended, subscriptions deleted (module docstring)."""

    def __init__(
        self,
        catalog: SubscriptionCatalog,
        cluster: ClusterDecisions,
        dispatcher: Dispatcher,
        tailer: Tailer,
        endpoints: EndpointState,
    ) -> None:
        """``endpoints``: where consumer links' states are kept (shared with the handler)."""
        self._catalog = catalog
        self._cluster = cluster
        self._dispatcher = dispatcher
        self._tailer = tailer
        self._endpoints = endpoints
        # Subscriptions without consumers whose lifetime ends with a session or connection.
        self._scoped: dict[str, tuple[str, proton.Session | proton.Connection]] = {}

    def consumer_gone(
        self,
        link: proton.Link,
        *,
        closed: bool,
        reply: Reply,
        session_ending: bool = False,
        connection_closing: bool = False,
    ) -> None:
        """A consumer link went away; ``reply(closed, condition)`` answers it (a deletion once
        its catalog commit is done)."""
        state = self._endpoints.consumer(link)
        if state is None:
            reply(closed, None)
            return
        self._endpoints.drop_link(link)
        self._catalog.link_event(
            state.key, state.generation, link.name, link.connection.remote_container or "", state.connection, "detached"
        )
        remaining = self._dispatcher.remove_consumer(state.key, link)
        self._cluster.release_if_last(state.key, remaining)
        rec = self._catalog.records.get(state.key)
        if rec is None or rec.table != state.table:
            reply(closed, None)
            return
        decide = functools.partial(
            attach.decide_detach, closed, session_ending=session_ending, connection_closing=connection_closing
        )
        decision = decide(rec, remaining)
        if remaining == 0:
            self._idle(rec)
        if self._cluster.counts_elsewhere(rec) and isinstance(decision, DeleteSubscription):
            # Several members: the consumers of the others keep it too (docs/design.md §8).
            def counted(current: SubscriptionRecord | None, seen: Seen | None) -> None:  # reactor thread
                if current is None:
                    reply(closed, None)  # deleted or replaced meanwhile
                elif seen is None and rec.identity.durable and closed:
                    reply(True, Condition(str(AmqpCondition.INTERNAL_ERROR), _UNCOUNTED))
                else:
                    # Not counted: kept (as if another member had a consumer), nothing lost.
                    there = seen.consumers.get(rec.key, 0) if seen is not None else 1
                    self._apply(decide(current, self._dispatcher.consumers(rec.key) + there), link, reply)

            self._cluster.count_then(rec, counted)
            return
        self._apply(decision, link, reply)

    def _apply(self, decision: attach.DetachDecision, link: proton.Link, reply: Reply) -> None:
        rec = decision.record
        match decision:
            case DeleteSubscription(reply_closed=reply_closed):
                self.delete(rec, lambda _r: reply(reply_closed, None))
            case RefuseDelete(condition=cond, description=desc, reply_closed=reply_closed):
                reply(reply_closed, Condition(str(cond), desc))
            case KeepSubscription(reply_closed=reply_closed, ends_with=ends_with):
                if ends_with == "session":
                    self._scoped[rec.key] = ("session", link.session)
                elif ends_with == "connection":
                    self._scoped[rec.key] = ("connection", link.connection)
                reply(reply_closed, None)

    def attached(self, key: str) -> None:
        """A consumer of ``key`` attached: no scope ends the subscription now."""
        self._scoped.pop(key, None)

    def scope_ended(self, kind: str, obj: proton.Session | proton.Connection) -> None:
        """A session or connection ended: delete subscriptions whose lifetime it was (with
        several members, unless another member has consumers of it: theirs end it then)."""
        for key, (k, o) in list(self._scoped.items()):
            if k == kind and o == obj and self._dispatcher.consumers(key) == 0:
                rec = self._catalog.records.get(key)
                self._scoped.pop(key, None)
                if rec is None:
                    continue
                if not self._cluster.counts_elsewhere(rec):
                    self.delete(rec)
                    continue
                self._cluster.count_then(rec, self._scope_counted)

    def _scope_counted(self, current: SubscriptionRecord | None, seen: Seen | None) -> None:
        """Other members' consumers counted for a subscription whose scope ended (reactor thread)."""
        if current is None or self._dispatcher.consumers(current.key) > 0:
            return
        if seen is None:
            log.warning("subscription %s kept: the consumers on the other members could not be counted", current.key)
        elif seen.consumers.get(current.key, 0) == 0:
            self.delete(current)

    def end_unconsumed(self, key: str, generation: int) -> None:
        """End generation ``generation`` of the non-durable subscription ``key``: the members
        found no live consumer of it for a grace (its last consumers' member died:
        sharedsub.core.ownership.unconsumed). Nothing when it has consumers here now, a scope
        here, a catalog write in flight, or is another generation by now."""
        rec = self._catalog.records.get(key)
        if rec is None or rec.generation != generation or rec.identity.durable:
            return
        if self._dispatcher.consumers(key) > 0 or key in self._scoped or self._catalog.busy(key):
            return
        log.info("subscription %s ended: no live member has consumers of it", key)
        self.delete(rec)

    def _idle(self, rec: SubscriptionRecord) -> None:
        """No consumer left here: stop reading its table (acknowledgements stay known)."""
        self._tailer.unwatch(rec.key)
        self._dispatcher.drop(rec.key)

    def delete(self, rec: SubscriptionRecord, then: Continuation | None = None) -> None:
        """Delete ``rec`` now: stop serving its generation, save its DELETED revision;
        ``then(result)`` once that is committed."""
        self._tailer.unwatch(rec.key)
        self._dispatcher.end_generation(rec.key, rec.table)
        self._scoped.pop(rec.key, None)
        self._catalog.remove(rec, then or (lambda _r: None))
        log.info("subscription %s deleted", rec.key)
