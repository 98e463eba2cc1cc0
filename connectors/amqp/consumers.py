"""Consumer links: attach and detach decisions applied, subscriptions kept, rows delivered.

Reactor thread only. Each attach becomes an :class:`~sharedsub.core.subscriptions.terminus.AttachRequest`, the pure
:func:`~sharedsub.core.subscriptions.attach.decide_attach` decides, and this module applies the decision: catalog
writes go through the committer (so a new subscription's ``start_seq`` is exact), the reply
source is written, and the link joins the subscription's dispatcher. Detach, session end and
connection close go through :func:`~sharedsub.core.subscriptions.attach.decide_detach` the same way.

The current catalog is held in memory (the front end is its only writer), so attach decisions
take no I/O; while a catalog write for a subscription is in flight, further attaches naming it
wait for it instead of deciding on stale state.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

import proton
from proton import Condition, Endpoint

from connectors.amqp import translate
from connectors.amqp.dispatcher import Dispatcher
from connectors.amqp.endpoint_state import ConsumerLink, EndpointState
from connectors.amqp.generations import GenerationTables
from connectors.amqp.refusal import refuse
from connectors.amqp.tokens import Continuation, Tokens
from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.config import Settings, several_members
from sharedsub.core.errors import ReplayInProgress, SharedSubError, SubscriptionMoved
from sharedsub.core.model import SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.core.security.permissions import Permission
from sharedsub.core.selector import check as check_selector
from sharedsub.core.subscriptions import attach
from sharedsub.core.subscriptions.attach import (
    Create,
    DeleteSubscription,
    Join,
    KeepSubscription,
    Lookup,
    NewGeneration,
    Refuse,
    RefuseDelete,
)
from sharedsub.runtime.cluster.member_claims import Held
from sharedsub.runtime.cluster.peer_consumers import Seen
from sharedsub.runtime.commit_requests import Barrier, LinkEvent, LinkRow, Result, SaveSubscription
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.permissions_file import PolicyStore
from sharedsub.runtime.tailer import Tailer
from sharedsub.storage.catalog import attached_links, load_catalog

log = logging.getLogger(__name__)

TopicGate = Callable[[str, Callable[[BaseException | None], None]], None]
"""``gate(topic, then)``: run ``then(None)`` once the topic exists, else ``then(error)``."""


_NOT_COUNTED = "could not count the consumers on the cluster's other members (the store did not answer)"
_UNCOUNTED = f"{_NOT_COUNTED}; the subscription is kept, try the unsubscribe again"


def _clashing_keys(identity: SubscriptionKey) -> list[str]:
    """Keys whose records an attach naming ``identity`` may join, change or clash with (a durable
    name clashes with the other sharedness too)."""
    if not identity.durable:
        return [identity.key]
    return [identity.key, dataclasses.replace(identity, shared=not identity.shared).key]


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


class Subscriptions:
    """The consumer side of the front end (see module docstring)."""

    def __init__(
        self,
        settings: Settings,
        committer: Committer,
        tailer: Tailer,
        dispatcher: Dispatcher,
        topic_gate: TopicGate,
        continuations: Tokens[Continuation],
        user_of: Callable[[proton.Connection], str | None] = lambda _conn: None,
        permissions: PolicyStore | None = None,
        endpoints: EndpointState | None = None,
        others: OtherMembers | None = None,
    ) -> None:
        """``dispatcher``: where consumer links are served (it owns delivery state);
        ``continuations``: the front end's registry of what a committer request leaves behind
        (connectors/amqp/tokens.py); ``user_of(connection)``: who authenticated on it (None:
        anonymous); ``permissions``: the policy attaches are checked against (None: the open one,
        sharedsub.core.security.permissions); ``endpoints``: where consumer links' states are
        kept (shared with the handler); ``others``: the other members of the data dir (None:
        this front end is alone)."""
        self.settings = settings
        # Several members share the data dir's subscriptions (docs/design.md §8): their
        # settlements are recorded for every generation, non-durable ones too.
        self.shared = several_members(settings)
        self._endpoints = endpoints if endpoints is not None else EndpointState()
        self._user_of = user_of
        self._permissions = permissions if permissions is not None else PolicyStore("")
        self.root = settings.data_dir
        self._committer = committer
        self._tailer = tailer
        self._topic_gate = topic_gate
        self._continuations = continuations  # never travel to other threads: tokens do
        self._dispatcher = dispatcher
        self.records: dict[str, SubscriptionRecord] = {}
        # Highest generation ever used per key, deleted ones included: a re-created subscription
        # gets a new table, so nothing of a deleted one's backlog comes back (ARTEMIS-177).
        self._generations: dict[str, int] = {}
        self._busy: dict[str, list[Callable[[], None]]] = {}
        # Subscriptions without consumers whose lifetime ends with a session or connection.
        self._scoped: dict[str, tuple[str, proton.Session | proton.Connection]] = {}
        self._replaying: set[str] = set()  # keys with a replay in progress (connectors/amqp/replays.py)
        # Several members: attach and detach decisions count their consumers too, and an
        # unshared durable subscription's consumer is claimed across them.
        self.others = others
        self._claimed: set[str] = set()  # keys claimed here (unshared durable, a consumer attached)

    def durable_tables(self) -> list[tuple[str, str]]:
        """``(table, topic)`` of the active durable subscriptions, newest first: what the tailer
        keeps warm (Tailer.keep_warm calls this on its thread; ``list()`` copies the records in one
        step of the interpreter, so the reactor changing them meanwhile does no harm)."""
        records = list(self.records.values())
        return [(r.table, r.topic) for r in reversed(records) if r.identity.durable and r.active]

    def load(self) -> None:
        """Read the catalog (start-up). Non-durable subscriptions do not survive a restart of
        the one front end of a data dir; with several members they may be another's, and stay."""
        stale = []
        for rec in load_catalog(self.root).values():
            self._generations[rec.key] = max(self._generations.get(rec.key, 0), rec.generation)
            if not rec.active:
                continue
            if rec.identity.durable or self.shared:
                self.records[rec.key] = rec
            else:
                stale.append(rec)
        for rec in stale:  # left behind by a crash: their consumers are gone
            self._save(dataclasses.replace(rec, state=SubscriptionState.DELETED), lambda _r: None)
        if self.shared:
            return  # links recorded as attached may be other members' (they are alive)
        # Links recorded as attached belonged to the previous run of this front end.
        for (key, name, container, connection), row in attached_links(self.root).items():
            self._link_event(key, row["generation"], name, container, connection, "detached")

    def merge(self, records: list[SubscriptionRecord]) -> None:
        """Catalog records committed by other members (several members share the data dir:
        docs/design.md §8), newer than what this front end knows: attach decisions and
        null-source lookups see them from now on. A subscription with consumers here, or with a
        catalog write of this front end in flight, keeps its local record unless the newer one
        is of the same generation (this front end's consumers decide for it)."""
        for rec in records:
            self._generations[rec.key] = max(self._generations.get(rec.key, 0), rec.generation)
            cur = self.records.get(rec.key)
            if (cur is not None and rec.revision <= cur.revision) or rec.key in self._busy:
                continue
            if self._dispatcher.consumers(rec.key) > 0 and (cur is None or cur.table != rec.table or not rec.active):
                log.warning(
                    "subscription %s changed on another member (generation %d, %s) while consumers are attached here",
                    rec.key, rec.generation, rec.state,
                )
                continue
            if rec.active:
                self.records[rec.key] = rec
            else:
                self.records.pop(rec.key, None)

    def _link_event(self, key: str, generation: int, name: str, container: str, connection: str, event: str) -> None:
        row = LinkRow(key=key, generation=generation, link=name, container=container, connection=connection, event=event)
        self._committer.submit(LinkEvent(row))

    # ------------------------------------------------------------------ attach

    def _existing(self, elsewhere: dict[str, int]) -> attach.ExistingLookup:
        """The attach rules' view of a subscription: its record and its consumers here plus
        ``elsewhere`` (other members', by key)."""

        def existing(identity: SubscriptionKey) -> attach.Existing | None:
            rec = self.records.get(identity.key)
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

    def _looked(self, link: proton.Sender, seen: Seen | None) -> None:
        """The store's word on the subscriptions an attach names (reactor thread)."""
        if not link.state & Endpoint.LOCAL_UNINIT or link.state & Endpoint.REMOTE_CLOSED:
            return  # the client gave up meanwhile
        if seen is None:
            refuse(link, AmqpCondition.INTERNAL_ERROR, f"{_NOT_COUNTED}; attach again")
            return
        self.merge(list(seen.records.values()))
        self.open_consumer(link, seen)

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
            if key in self._busy:  # a catalog write for it is in flight: decide after it
                self._busy[key].append(lambda: self._reopen(link))
                return
        if self.others is not None and seen is None and not plain:
            # Several members: decide on the latest catalog and everyone's consumers.
            self.others.look(owned, lambda answer: self._looked(link, answer))
            return
        user = self._user_of(link.connection)
        policy = self._permissions.policy
        # Before deciding: a refusal about another user's subscription (in use, changed) would
        # tell this one it exists. A durable name clashes with the other sharedness too.
        for key in owned:
            rec = self.records.get(key)
            if rec is not None and rec.active:
                policy.check_subscription(user, rec.owner, rec.topic, rec.identity.name)
        decision = attach.decide_attach(
            request,
            self._existing(seen.consumers if seen is not None else {}),
            shared_consumer_limit=self.settings.server.shared_consumer_limit or None,
            new_name=new_name,
            validate_selector=check_selector,
        )
        if held and not isinstance(decision, Refuse):
            # Another member's consumer holds it, and its record has not reached this one yet.
            in_use = "Subscription is already in use: its consumer is attached to another member of the cluster"
            refuse(link, AmqpCondition.RESOURCE_LOCKED, in_use)
            return
        match decision:
            case Refuse(condition=cond, description=desc, field=field):
                refuse(link, str(cond), desc, {proton.symbol("field"): proton.symbol(field)} if field else None)
            case Join(record=rec, reply=reply) | Lookup(record=rec, reply=reply):
                policy.check(user, Permission.CONSUME, rec.topic)
                self._claim_then(link, rec, seen, functools.partial(self._attach, link, rec, reply))
            case Create() | NewGeneration():
                policy.check(user, Permission.CONSUME, decision.topic)
                previous = decision.record if isinstance(decision, NewGeneration) else None
                rec = self._generation_record(decision, previous, user)
                if previous is not None:
                    log.info("subscription %s: new generation %d (%s)", rec.key, rec.generation, rec.topic)
                self._claim_then(link, rec, seen, functools.partial(self._create, link, rec, decision.reply))

    def _claim_then(
        self,
        link: proton.Sender,
        rec: SubscriptionRecord,
        seen: Seen | None,
        then: Callable[[], None],
    ) -> None:
        """Run ``then()``, first claiming ``rec`` across the members when it is an unshared
        durable subscription (at most one consumer in the cluster, runtime/cluster/member_claims)."""
        others = self.others
        if others is None or rec.identity.shared or not rec.identity.durable:
            then()
            return
        known = self.records.get(rec.key) is rec  # its consumer joins it (else it is being created)

        def claimed(held: Held | None) -> None:  # reactor thread
            gone = not link.state & Endpoint.LOCAL_UNINIT or link.state & Endpoint.REMOTE_CLOSED
            if gone or (known and self.records.get(rec.key) is not rec):
                if held is None and self._dispatcher.consumers(rec.key) == 0:
                    others.release_subscription(rec.key)
                if not gone:
                    self.open_consumer(link)  # the subscription changed meanwhile: decide again
                return
            if held is not None and held.error is not None:
                refuse(link, AmqpCondition.INTERNAL_ERROR, held.describe(f"subscription {rec.identity.name!r}"))
            elif held is not None:
                looked = seen if seen is not None else Seen({}, {})
                self.open_consumer(link, looked.with_one_more(rec.key), held=True)  # refused as one front end refuses it
            else:
                self._claimed.add(rec.key)
                then()

        others.claim_subscription(rec.key, claimed)

    def _generation_record(
        self, decision: Create | NewGeneration, previous: SubscriptionRecord | None, user: str | None
    ) -> SubscriptionRecord:
        """The record of a new subscription, or of the next generation of ``previous``.

        The generation number is one above any this key ever had, deleted ones included; the
        committer fills in ``start_seq`` and ``revision``. The owner is the previous
        generation's, or ``user`` for a new subscription (or one that had none).
        """
        identity = previous.identity if previous is not None else decision.identity  # type: ignore[union-attr]
        used = max(previous.generation if previous is not None else 0, self._generations.get(identity.key, 0))
        now = dt.datetime.now(dt.UTC)
        return SubscriptionRecord(
            identity=identity,
            generation=used + 1,
            state=SubscriptionState.ACTIVE,
            topic=decision.topic,
            binding=decision.binding,
            selector=decision.selector,
            no_local=decision.no_local,
            expiry_policy=decision.expiry_policy,
            start_seq=0,
            source=decision.stored_source,
            created_at=previous.created_at if previous is not None else now,
            updated_at=now,
            owner=previous.owner if previous is not None and previous.owner is not None else user,
        )

    def _reopen(self, link: proton.Sender) -> None:
        if link.state & Endpoint.LOCAL_UNINIT and not link.state & Endpoint.REMOTE_CLOSED:
            self.open_consumer(link)

    def _create(self, link: proton.Sender, rec: SubscriptionRecord, reply: attach.ReplySource) -> None:
        key = rec.key
        self._busy[key] = []
        self._generations[key] = max(self._generations.get(key, 0), rec.generation)

        def release() -> None:
            for cont in self._busy.pop(key, []):
                cont()

        def saved(result: Result) -> None:
            if isinstance(result.error, SubscriptionMoved):
                # Another member created it first (its record had not reached this one): decide
                # again on its record.
                waiting = self._busy.pop(key, [])
                self.merge([result.error.record])
                for cont in waiting:
                    cont()
                if not link.state & Endpoint.REMOTE_CLOSED:
                    self.open_consumer(link)
                return
            if result.error is not None:
                # A typed error carries its condition (a data dir taking no writes is
                # resource-limit-exceeded); anything else is the service's fault.
                condition = result.error.condition if isinstance(result.error, SharedSubError) else AmqpCondition.INTERNAL_ERROR
                refuse(link, condition, f"could not store subscription {rec.identity.name!r}: {result.error}")
                release()
                return
            stored = result.record()
            replaced = self.records.get(key)
            if replaced is not None and replaced.table != stored.table:  # a new generation
                self._dispatcher.end_generation(key, replaced.table)
            self.records[key] = stored
            if link.state & Endpoint.REMOTE_CLOSED and not stored.identity.durable:
                self._delete(stored)
            elif not link.state & Endpoint.REMOTE_CLOSED:
                self._attach(link, stored, reply)
            release()

        def topic_ready(error: BaseException | None) -> None:
            if error is not None:
                err = error if isinstance(error, SharedSubError) else SharedSubError(str(error))
                refuse(link, str(err.condition), err.description)
                release()
                return
            self._committer.submit(SaveSubscription(rec, assign_start=True, token=self._continuations.put(saved)))

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
        self._link_event(rec.key, rec.generation, link.name, link.connection.remote_container or "", connection, "attached")
        self._scoped.pop(rec.key, None)
        tables = GenerationTables.of(rec, shared=self.shared)
        acked = self._dispatcher.open(rec.key, tables)
        self._tailer.watch(rec.key, rec.table, rec.topic, acked=acked, ack_table_rel=tables.ack_table)
        self._dispatcher.add_consumer(rec.key, link)
        log.info(
            "link %r consumes %s gen %d (%s, start seq %d)",
            link.name, rec.key, rec.generation, rec.topic, rec.start_seq,
        )

    # ------------------------------------------------------------------ detach

    def consumer_gone(
        self,
        link: proton.Link,
        *,
        closed: bool,
        reply: Callable[[bool, Condition | None], None],
        session_ending: bool = False,
        connection_closing: bool = False,
    ) -> None:
        """A consumer link went away; ``reply(closed, condition)`` answers it.

        A deletion is answered only once the catalog commit that records it is done, so an
        unsubscribe the client saw succeed never comes back after a crash.
        """
        state = self._endpoints.consumer(link)
        if state is None:
            reply(closed, None)
            return
        self._endpoints.drop_link(link)
        self._link_event(
            state.key, state.generation, link.name, link.connection.remote_container or "", state.connection, "detached"
        )
        remaining = self._dispatcher.remove_consumer(state.key, link)
        if remaining == 0 and state.key in self._claimed and self.others is not None:
            self._claimed.discard(state.key)
            self.others.release_subscription(state.key)
        rec = self.records.get(state.key)
        if rec is None or rec.table != state.table:
            reply(closed, None)
            return
        decide = functools.partial(
            attach.decide_detach, closed, session_ending=session_ending, connection_closing=connection_closing
        )
        decision = decide(rec, remaining)
        if remaining == 0:
            self._idle(rec)
        others = self.others
        if others is not None and rec.identity.shared and isinstance(decision, DeleteSubscription):
            # Several members: the consumers of the others keep it too (docs/design.md §8).
            def counted(seen: Seen | None) -> None:  # reactor thread
                current = self._after_look(rec, seen)
                if current is None:
                    reply(closed, None)  # deleted or replaced meanwhile
                elif seen is None and rec.identity.durable and closed:
                    reply(True, Condition(str(AmqpCondition.INTERNAL_ERROR), _UNCOUNTED))
                else:
                    # Not counted: kept (as if another member had a consumer), nothing lost.
                    there = seen.consumers.get(rec.key, 0) if seen is not None else 1
                    self._apply_detach(decide(current, self._dispatcher.consumers(rec.key) + there), link, reply)

            others.look([rec.key], counted)
            return
        self._apply_detach(decision, link, reply)

    def _apply_detach(
        self, decision: attach.DetachDecision, link: proton.Link, reply: Callable[[bool, Condition | None], None]
    ) -> None:
        rec = decision.record
        match decision:
            case DeleteSubscription(reply_closed=reply_closed):
                self._delete(rec, lambda _r: reply(reply_closed, None))
            case RefuseDelete(condition=cond, description=desc, reply_closed=reply_closed):
                reply(reply_closed, Condition(str(cond), desc))
            case KeepSubscription(reply_closed=reply_closed, ends_with=ends_with):
                if ends_with == "session":
                    self._scoped[rec.key] = ("session", link.session)
                elif ends_with == "connection":
                    self._scoped[rec.key] = ("connection", link.connection)
                reply(reply_closed, None)

    def scope_ended(self, kind: str, obj: proton.Session | proton.Connection) -> None:
        """A session or connection ended: delete subscriptions whose lifetime it was (with
        several members, unless another member has consumers of it: theirs end it then)."""
        for key, (k, o) in list(self._scoped.items()):
            if k == kind and o == obj and self._dispatcher.consumers(key) == 0:
                rec = self.records.get(key)
                self._scoped.pop(key, None)
                if rec is None:
                    continue
                if self.others is None or not rec.identity.shared:
                    self._delete(rec)
                    continue
                self.others.look([rec.key], functools.partial(self._scope_counted, rec))

    def _scope_counted(self, rec: SubscriptionRecord, seen: Seen | None) -> None:
        """Other members' consumers counted for a subscription whose scope ended (reactor thread)."""
        current = self._after_look(rec, seen)
        if current is None or self._dispatcher.consumers(rec.key) > 0:
            return
        if seen is None:
            log.warning("subscription %s kept: the consumers on the other members could not be counted", rec.key)
        elif seen.consumers.get(rec.key, 0) == 0:
            self._delete(current)

    def _after_look(self, rec: SubscriptionRecord, seen: Seen | None) -> SubscriptionRecord | None:
        """Take in the records the store showed (another member may have deleted or replaced
        ``rec``'s generation); the current record of ``rec``'s generation, None when it is gone."""
        if seen is not None:
            self.merge(list(seen.records.values()))
        current = self.records.get(rec.key)
        return current if current is not None and current.table == rec.table else None

    def end_unconsumed(self, key: str, generation: int) -> None:
        """End generation ``generation`` of the non-durable subscription ``key``: the members
        found no live consumer of it for a grace (its last consumers' member died:
        sharedsub.core.ownership.unconsumed). Nothing when it has consumers here now, a scope
        here, a catalog write in flight, or is another generation by now."""
        rec = self.records.get(key)
        if rec is None or rec.generation != generation or rec.identity.durable:
            return
        if self._dispatcher.consumers(key) > 0 or key in self._scoped or key in self._busy:
            return
        log.info("subscription %s ended: no live member has consumers of it", key)
        self._delete(rec)

    def _idle(self, rec: SubscriptionRecord) -> None:
        """No consumer left here: stop reading its table (acknowledgements stay known)."""
        self._tailer.unwatch(rec.key)
        self._dispatcher.drop(rec.key)

    # ------------------------------------------------------------------ replay (connectors/amqp/replays.py)

    def begin_replay(self, rec: SubscriptionRecord, shown: str) -> None:
        """Mark a replay of ``rec`` as under way until :meth:`end_replay`.

        Raises:
            ReplayInProgress: one is under way already (``shown`` names the subscription).
        """
        if rec.key in self._replaying:
            raise ReplayInProgress(shown)
        self._replaying.add(rec.key)

    def end_replay(self, rec: SubscriptionRecord) -> None:
        """The replay of ``rec`` is over (answered or failed)."""
        self._replaying.discard(rec.key)

    def after_acks_stored(self, then: Callable[[], None]) -> None:
        """Call ``then()`` on the reactor thread once every acknowledgement submitted so far is in
        its ack log (a committer barrier: it waits for held or parked writes too). A replay plans
        from the ack log alone (sharedsub.core.ops.replay), so it starts after this."""
        self._committer.submit(Barrier(self._continuations.put(lambda _result: then())))

    def reopen(self, rec: SubscriptionRecord, seqs: frozenset[int]) -> int:
        """A replay opened ``seqs`` again (their ``replayed`` ack rows are committed): forget them
        as acknowledged and have the tailer load the backlog again, which re-delivers them (and
        not the rows already waiting or outstanding). Returns the consumer links attached here."""
        self._dispatcher.reopen(rec.table, seqs)
        self._tailer.rewind(rec.key)
        return self._dispatcher.consumers(rec.key)

    def busy(self, key: str) -> bool:
        """True while a catalog write for ``key`` is in flight (its state is about to change)."""
        return key in self._busy

    def unsubscribe(self, rec: SubscriptionRecord, then: Callable[[Result], None] | None = None) -> None:
        """Delete ``rec`` now (the admin ``unsubscribe``; its rule is the caller's:
        sharedsub.core.ops.admin_rules). ``then(result)`` runs once the DELETED revision is committed."""
        self._delete(rec, then)

    def _delete(self, rec: SubscriptionRecord, then: Callable[[Result], None] | None = None) -> None:
        self._tailer.unwatch(rec.key)
        self._dispatcher.end_generation(rec.key, rec.table)
        self.records.pop(rec.key, None)
        self._scoped.pop(rec.key, None)
        self._save(dataclasses.replace(rec, state=SubscriptionState.DELETED), then or (lambda _r: None))
        log.info("subscription %s deleted", rec.key)

    def _save(self, rec: SubscriptionRecord, then: Callable[[Result], None]) -> None:
        self._committer.submit(SaveSubscription(rec, assign_start=False, token=self._continuations.put(then)))
