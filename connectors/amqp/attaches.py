"""Consumer attaches: decided by the attach rules, applied to the link, the catalog and the dispatcher.

Each attach becomes an :class:`~sharedsub.core.subscriptions.terminus.AttachRequest`, the pure
:func:`~sharedsub.core.subscriptions.attach.decide_attach` decides on the records held in memory
(connectors/amqp/subscription_catalog.py: an attach naming a busy key waits for its write), and
this module applies the decision: a refusal answers the link; a join or lookup attaches it; a new
subscription or generation is saved through the committer first (so its ``start_seq`` is exact,
after its topic exists: ``TopicGate``), then attached. An attached link writes its reply source
and joins the subscription's dispatcher, which the tailer feeds. With several members the store
is asked first and an unshared durable subscription is claimed (connectors/amqp/cluster_decisions.py).

Reactor thread only (connectors/amqp/tokens.py).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import uuid
from collections.abc import Callable

import proton
from proton import Endpoint

from connectors.amqp import translate
from connectors.amqp.cluster_decisions import ClusterDecisions
from connectors.amqp.detaches import Detaches
from connectors.amqp.dispatcher import Dispatcher
from connectors.amqp.endpoint_state import ConsumerLink, EndpointState
from connectors.amqp.generations import GenerationTables
from connectors.amqp.refusal import refuse
from connectors.amqp.subscription_catalog import SubscriptionCatalog
from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.errors import SharedSubError, SubscriptionMoved
from sharedsub.core.model import SubscriptionKey, SubscriptionRecord
from sharedsub.core.security.permissions import Permission
from sharedsub.core.selector import check as check_selector
from sharedsub.core.subscriptions import attach
from sharedsub.core.subscriptions.attach import Create, Join, Lookup, NewGeneration, Refuse
from sharedsub.runtime.cluster.peer_consumers import Seen
from sharedsub.runtime.commit_requests import Result
from sharedsub.runtime.permissions_file import PolicyStore
from sharedsub.runtime.tailer import Tailer

log = logging.getLogger(__name__)

TopicGate = Callable[[str, Callable[[BaseException | None], None]], None]
"""``gate(topic, then)``: run ``then(None)`` once the topic exists, else ``then(error)``."""


def _clashing_keys(identity: SubscriptionKey) -> list[str]:
    """Keys whose records an attach naming ``identity`` may join, change or clash with (a durable
    name clashes with the other sharedness too)."""
    if not identity.durable:
        return [identity.key]
    return [identity.key, dataclasses.replace(identity, shared=not identity.shared).key]


@dataclasses.dataclass(frozen=True, slots=True)
class AttachPolicy:
    """Who may attach to what: ``user_of(connection)`` (None: anonymous), the ``permissions``
    attaches are checked against, and the consumers a shared subscription may have
    (``shared_consumer_limit``, None: no limit)."""

    user_of: Callable[[proton.Connection], str | None]
    permissions: PolicyStore
    shared_consumer_limit: int | None


class Attaches:
    """Consumer attaches decided and applied (module docstring)."""

    def __init__(
        self,
        catalog: SubscriptionCatalog,
        cluster: ClusterDecisions,
        detaches: Detaches,
        dispatcher: Dispatcher,
        tailer: Tailer,
        topic_gate: TopicGate,
        endpoints: EndpointState,
        policy: AttachPolicy,
        *,
        shared: bool,
    ) -> None:
        """``detaches``: where a subscription is deleted (a non-durable one whose link closed
        before it was stored) and its scope ended; ``endpoints``: where consumer links' states are
        kept (shared with the handler); ``shared``: several members share the data dir, so their
        settlements are recorded for every generation, non-durable ones too (docs/design.md §8)."""
        self._catalog = catalog
        self._cluster = cluster
        self._detaches = detaches
        self._dispatcher = dispatcher
        self._tailer = tailer
        self._topic_gate = topic_gate
        self._endpoints = endpoints
        self._policy = policy
        self._shared = shared

    def _existing(self, elsewhere: dict[str, int]) -> attach.ExistingLookup:
        """The attach rules' view of a subscription: its record and its consumers here plus
        ``elsewhere`` (other members', by key)."""

        def existing(identity: SubscriptionKey) -> attach.Existing | None:
            rec = self._catalog.records.get(identity.key)
            if rec is None or not rec.active:
                return None
            return attach.Existing(rec, self._dispatcher.consumers(rec.key) + elsewhere.get(rec.key, 0))

        return existing

    def open_consumer(self, link: proton.Sender, seen: Seen | None = None, *, held: bool = False) -> None:
        """Decide and apply a consumer attach (a typed error refuses it with its condition).
        ``seen``: with several members, what the store said of the subscriptions named, once
        read; ``held``: another member holds the claim of the unshared durable subscription named."""
        try:
            self._open_consumer(link, seen, held)
        except SharedSubError as exc:
            refuse(link, str(exc.condition), exc.description)

    def _decide_again(self, link: proton.Sender, seen: Seen | None, held: bool) -> None:
        self.open_consumer(link, seen, held=held)

    def _open_consumer(self, link: proton.Sender, seen: Seen | None, held: bool) -> None:
        request = translate.attach_request(link)
        new_name = f"{link.name}#{uuid.uuid4().hex}"
        plain = False  # an unshared non-durable consumer: its subscription is its link's alone
        if request.source is None:
            keys = owned = [k.key for k in attach.lookup_identities(request)]
        else:
            identity = attach.identity_for(request, new_name=new_name)
            keys, owned = [identity.key], _clashing_keys(identity)
            plain = not identity.durable and not identity.shared
        for key in keys:
            if self._catalog.busy(key):  # a catalog write for it is in flight: decide after it
                self._catalog.wait(key, lambda: self._reopen(link))
                return
        if self._cluster.several and seen is None and not plain:
            # Several members: decide on the latest catalog and everyone's consumers.
            self._cluster.look_then_decide(link, owned, lambda answer: self.open_consumer(link, answer))
            return
        user = self._policy.user_of(link.connection)
        policy = self._policy.permissions.policy
        # Before deciding: a refusal about another user's subscription (in use, changed) would
        # tell this one it exists. A durable name clashes with the other sharedness too.
        for key in owned:
            rec = self._catalog.records.get(key)
            if rec is not None and rec.active:
                policy.check_subscription(user, rec.owner, rec.topic, rec.identity.name)
        decision = attach.decide_attach(
            request,
            self._existing(seen.consumers if seen is not None else {}),
            shared_consumer_limit=self._policy.shared_consumer_limit,
            new_name=new_name,
            validate_selector=check_selector,
        )
        if held and not isinstance(decision, Refuse):
            # Another member's consumer holds it, and its record has not reached this one yet.
            in_use = "Subscription is already in use: its consumer is attached to another member of the cluster"
            refuse(link, AmqpCondition.RESOURCE_LOCKED, in_use)
            return
        decide_again = functools.partial(self._decide_again, link)
        match decision:
            case Refuse(condition=cond, description=desc, field=field):
                refuse(link, str(cond), desc, {proton.symbol("field"): proton.symbol(field)} if field else None)
            case Join(record=rec, reply=reply) | Lookup(record=rec, reply=reply):
                policy.check(user, Permission.CONSUME, rec.topic)
                self._cluster.claim_then(link, rec, seen, functools.partial(self._attach, link, rec, reply), decide_again)
            case Create() | NewGeneration():
                policy.check(user, Permission.CONSUME, decision.topic)
                previous = decision.record if isinstance(decision, NewGeneration) else None
                rec = self._catalog.new_record(decision, previous, user)
                if previous is not None:
                    log.info("subscription %s: new generation %d (%s)", rec.key, rec.generation, rec.topic)
                self._cluster.claim_then(
                    link, rec, seen, functools.partial(self._create, link, rec, decision.reply), decide_again
                )

    def _reopen(self, link: proton.Sender) -> None:
        if link.state & Endpoint.LOCAL_UNINIT and not link.state & Endpoint.REMOTE_CLOSED:
            self.open_consumer(link)

    def _create(self, link: proton.Sender, rec: SubscriptionRecord, reply: attach.ReplySource) -> None:
        key = rec.key
        self._catalog.begin_write(rec)

        def saved(result: Result) -> None:
            if isinstance(result.error, SubscriptionMoved):
                # Another member created it first (its record had not reached this one): decide
                # again on its record.
                self._catalog.moved(key, result.error.record)
                if not link.state & Endpoint.REMOTE_CLOSED:
                    self.open_consumer(link)
                return
            if result.error is not None:
                # A typed error carries its condition (a data dir taking no writes is
                # resource-limit-exceeded); anything else is the service's fault.
                condition = result.error.condition if isinstance(result.error, SharedSubError) else AmqpCondition.INTERNAL_ERROR
                refuse(link, condition, f"could not store subscription {rec.identity.name!r}: {result.error}")
                self._catalog.end_write(key)
                return
            stored = result.record()
            replaced = self._catalog.records.get(key)
            if replaced is not None and replaced.table != stored.table:  # a new generation
                self._dispatcher.end_generation(key, replaced.table)
            self._catalog.stored(stored)
            if link.state & Endpoint.REMOTE_CLOSED and not stored.identity.durable:
                self._detaches.delete(stored)
            elif not link.state & Endpoint.REMOTE_CLOSED:
                self._attach(link, stored, reply)
            self._catalog.end_write(key)

        def topic_ready(error: BaseException | None) -> None:
            if error is not None:
                err = error if isinstance(error, SharedSubError) else SharedSubError(str(error))
                refuse(link, str(err.condition), err.description)
                self._catalog.end_write(key)
                return
            self._catalog.save_new(rec, saved)

        self._topic_gate(rec.topic, topic_ready)

    def _attach(self, link: proton.Sender, rec: SubscriptionRecord, reply: attach.ReplySource) -> None:
        translate.apply_reply(link, reply)
        # Echo the consumer's sender settle mode (settled = at-most-once, sent pre-settled);
        # receiver settle mode second is not supported and answered as first.
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = proton.Link.RCV_FIRST
        link.open()
        connection = self._endpoints.connection_id(link.connection)
        self._endpoints.set_link(link, ConsumerLink(rec.key, rec.table, rec.generation, connection))
        self._catalog.link_event(
            rec.key, rec.generation, link.name, link.connection.remote_container or "", connection, "attached"
        )
        self._detaches.attached(rec.key)
        tables = GenerationTables.of(rec, shared=self._shared)
        acked = self._dispatcher.open(rec.key, tables)
        self._tailer.watch(rec.key, rec.table, rec.topic, acked=acked, ack_table_rel=tables.ack_table)
        self._dispatcher.add_consumer(rec.key, link)
        log.info(
            "link %r consumes %s gen %d (%s, start seq %d)",
            link.name, rec.key, rec.generation, rec.topic, rec.start_seq,
        )
