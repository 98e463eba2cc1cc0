"""Consumer links: the consumer side of the front end, the one object its callers use.

:class:`Subscriptions` composes the parts, each a module of its own:

* connectors/amqp/subscription_catalog.py: the current catalog held in memory (the front end is
  its only writer, so attach decisions take no I/O), the generations used, the keys busy with a
  catalog write in flight, and every catalog write through the committer;
* connectors/amqp/attaches.py: attaches decided by the pure
  :func:`~sharedsub.core.subscriptions.attach.decide_attach` and applied (a new subscription's
  record saved before its link is attached, so its ``start_seq`` is exact);
* connectors/amqp/detaches.py: detaches, session ends and connection closes decided by
  :func:`~sharedsub.core.subscriptions.attach.decide_detach` and applied; deletions;
* connectors/amqp/cluster_decisions.py: with several members, the other members' consumers
  and records in those decisions, and the claim of an unshared durable subscription;
* here: the replays in progress (connectors/amqp/replays.py).

Reactor thread only, but for what the parts say may be read from other threads
(:attr:`Subscriptions.records` copied in one step, :meth:`Subscriptions.durable_tables`).
"""

from __future__ import annotations

from collections.abc import Callable

import proton
from proton import Condition

from connectors.amqp.attaches import Attaches, AttachPolicy, TopicGate
from connectors.amqp.cluster_decisions import ClusterDecisions, OtherMembers
from connectors.amqp.detaches import Detaches
from connectors.amqp.dispatcher import Dispatcher
from connectors.amqp.endpoint_state import EndpointState
from connectors.amqp.subscription_catalog import SubscriptionCatalog
from connectors.amqp.tokens import Continuation, Tokens
from sharedsub.core.config import Settings, several_members
from sharedsub.core.errors import ReplayInProgress
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.commit_requests import Barrier, Result
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.permissions_file import PolicyStore
from sharedsub.runtime.tailer import Tailer


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
        # Several members share the data dir's subscriptions (docs/design.md §8): their
        # settlements are recorded for every generation, non-durable ones too.
        shared = several_members(settings)
        endpoints = endpoints if endpoints is not None else EndpointState()
        self._committer = committer
        self._continuations = continuations  # never travel to other threads: tokens do
        self._tailer = tailer
        self._dispatcher = dispatcher
        self.catalog = SubscriptionCatalog(settings.data_dir, committer, continuations, dispatcher.consumers, shared=shared)
        self.cluster = ClusterDecisions(self.catalog, dispatcher.consumers, others)
        self.detaches = Detaches(self.catalog, self.cluster, dispatcher, tailer, endpoints)
        policy = AttachPolicy(
            user_of=user_of,
            permissions=permissions if permissions is not None else PolicyStore(""),
            shared_consumer_limit=settings.server.shared_consumer_limit or None,
        )
        self.attaches = Attaches(
            self.catalog, self.cluster, self.detaches, dispatcher, tailer, topic_gate, endpoints, policy, shared=shared
        )
        self._replaying: set[str] = set()  # keys with a replay in progress (connectors/amqp/replays.py)

    # ------------------------------------------------------------------ the catalog

    @property
    def records(self) -> dict[str, SubscriptionRecord]:
        """The active records by key (SubscriptionCatalog.records)."""
        return self.catalog.records

    def durable_tables(self) -> list[tuple[str, str]]:
        """See SubscriptionCatalog.durable_tables (the tailer's thread)."""
        return self.catalog.durable_tables()

    def load(self) -> None:
        """Read the catalog (start-up): SubscriptionCatalog.load."""
        self.catalog.load()

    def merge(self, records: list[SubscriptionRecord]) -> None:
        """Catalog records committed by other members: SubscriptionCatalog.merge."""
        self.catalog.merge(records)

    def busy(self, key: str) -> bool:
        """True while a catalog write for ``key`` is in flight (its state is about to change)."""
        return self.catalog.busy(key)

    # ------------------------------------------------------------------ attach, detach

    def open_consumer(self, link: proton.Sender) -> None:
        """Decide and apply a consumer attach: Attaches.open_consumer."""
        self.attaches.open_consumer(link)

    def consumer_gone(
        self,
        link: proton.Link,
        *,
        closed: bool,
        reply: Callable[[bool, Condition | None], None],
        session_ending: bool = False,
        connection_closing: bool = False,
    ) -> None:
        """A consumer link went away; ``reply(closed, condition)`` answers it: Detaches.consumer_gone."""
        self.detaches.consumer_gone(
            link, closed=closed, reply=reply, session_ending=session_ending, connection_closing=connection_closing
        )

    def scope_ended(self, kind: str, obj: proton.Session | proton.Connection) -> None:
        """A session or connection ended: Detaches.scope_ended."""
        self.detaches.scope_ended(kind, obj)

    def end_unconsumed(self, key: str, generation: int) -> None:
        """End a non-durable subscription no live member consumes: Detaches.end_unconsumed."""
        self.detaches.end_unconsumed(key, generation)

    def unsubscribe(self, rec: SubscriptionRecord, then: Callable[[Result], None] | None = None) -> None:
        """Delete ``rec`` now (the admin ``unsubscribe``; its rule is the caller's:
        sharedsub.core.ops.admin_rules). ``then(result)`` runs once the DELETED revision is committed."""
        self.detaches.delete(rec, then)

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
