"""The AMQP front end: a proton handler that translates events, calls the core, applies results.

It never evaluates selectors and never fans out (docs/design.md §1): it decides attaches, hands published
messages to the :class:`~sharedsub.runtime.committer.Committer` (settling each publisher delivery only after
the Delta commit that holds it), and delivers what the fan-out job wrote to subscription tables
(:mod:`connectors.amqp.consumers`).

Work done on other threads (commits, table reads) comes back through the parts' ``Inbox`` as
typed calls (:meth:`FrontEnd.committed`, :meth:`FrontEnd.rows_read`), so every proton object is
touched on the reactor thread only; what a request leaves behind waits in typed registries
(connectors/amqp/tokens.py).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import proton
from proton import Condition, Delivery, Endpoint, Handler, symbol

from connectors.amqp.consumers import Subscriptions
from connectors.amqp.endpoint_state import ConsumerLink, PublisherLink
from connectors.amqp.parts import FrontEndParts
from connectors.amqp.refusal import refuse
from connectors.amqp.tokens import Continuation, PublishContext, Tokens
from connectors.amqp.topic_gate import TopicGate
from connectors.amqp.transactions import TRANSACTIONAL_STATE, Coordinator, is_coordinator, transaction_of
from connectors.amqp.wire.proton_events import DeliveryTransfer, MessageEvent, Transfer, link_key_of, transfer_of
from sharedsub.core import addressing
from sharedsub.core.conditions import CONNECTION_OFFERED, AmqpCondition, Capability
from sharedsub.core.delivery import transactions as txn_rules
from sharedsub.core.errors import InvalidAttach, MessageDecodeError, MessageTooLarge, SharedSubError
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops import metrics
from sharedsub.core.publish import amqp_message
from sharedsub.core.publish.topic_row import topic_columns
from sharedsub.core.security.permissions import Permission
from sharedsub.runtime.cluster.member_claims import Held
from sharedsub.runtime.commit_requests import Publish, Result
from sharedsub.runtime.tailer import Row
from sharedsub.storage import topics

log = logging.getLogger(__name__)

CONTAINER_ID = "sharedsub"
"""The container-id of the service's open frame."""


def _no_reply(_closed: bool, _condition: Condition | None) -> None:
    pass


_H = TypeVar("_H")  # the handler
_E = TypeVar("_E")  # the event: a proton.Event, or the pump's MessageEvent (connectors.amqp.wire.proton_events)


def _contained(method: Callable[[_H, _E], None]) -> Callable[[_H, _E], None]:
    """Run a client-driven event callback so that what goes wrong in it ends at most the
    connection the event came from, never the reactor (and with it every other client)."""

    @functools.wraps(method)
    def guarded(self: _H, event: _E) -> None:
        try:
            method(self, event)
        except Exception as exc:
            conn = getattr(event, "connection", None)
            log.exception("%s failed; closing its connection", method.__name__)
            if conn is not None and not conn.state & Endpoint.LOCAL_CLOSED:
                conn.condition = Condition(str(AmqpCondition.INTERNAL_ERROR), f"internal error: {exc}")
                conn.close()

    return guarded


def _live(endpoint: proton.Session | proton.Link | None, most: int) -> int:
    """How many endpoints of a ``*_head(0)`` list the peer opened and neither side closed (an
    attach still waiting for its catalog write counts), counting no further than ``most``."""
    n = 0
    while endpoint is not None and n < most:
        state = endpoint.state
        if state & Endpoint.REMOTE_ACTIVE and not state & Endpoint.LOCAL_CLOSED:
            n += 1
        endpoint = endpoint.next(0)
    return n


def _refuse_connection(conn: proton.Connection, condition: AmqpCondition, description: str, *, field: str | None = None) -> None:
    """Answer an open, then close the connection with ``condition`` (info ``{invalid-field:
    field}`` when a field is named, as docs/wire.md §2.1 has it)."""
    conn.open()
    conn.condition = Condition(str(condition), description, {symbol("invalid-field"): symbol(field)} if field else None)
    conn.close()


def _refuse_client_id(conn: proton.Connection, description: str) -> None:
    """docs/wire.md §2.1: refuse a connection whose container-id is taken; the Qpid JMS client
    raises InvalidClientIDException."""
    conn.properties = {symbol("amqp:connection-establishment-failed"): True}
    _refuse_connection(conn, AmqpCondition.INVALID_FIELD, description, field="container-id")


def _reject(dlv: Delivery, condition: str, description: str) -> None:
    """Settle a published transfer rejected with ``condition``."""
    dlv.local.condition = Condition(condition, description)
    dlv.update(Delivery.REJECTED)
    dlv.settle()


def _refuse_error(link: proton.Link, error: BaseException) -> None:
    err = error if isinstance(error, SharedSubError) else SharedSubError(f"internal error: {error}")
    refuse(link, str(err.condition), err.description)


class FrontEnd(Handler):
    """The proton handler of ``sharedsub serve`` / ``sharedsub frontend``."""

    def __init__(self, parts: FrontEndParts) -> None:
        """Run with ``parts`` (connectors.amqp.parts builds them; nothing is built here but the
        reactor-side state: subscriptions, transactions, topic gates)."""
        super().__init__()
        settings = parts.settings
        self.settings = settings
        self.root = settings.data_dir
        self._injector = parts.injector
        self.cache = parts.cache
        self.stages = parts.stages
        self.committer = parts.committer
        self.tailer = parts.tailer
        self.dispatcher = parts.dispatcher
        self.publish_window = parts.publish_window
        self.counters = parts.counters
        self.identities = parts.identities
        self.permissions = parts.permissions
        self.endpoints = parts.endpoints
        self.cluster = parts.cluster
        # What committer requests leave behind on this thread (connectors/amqp/tokens.py).
        self.publishes: Tokens[PublishContext] = Tokens()
        self.continuations: Tokens[Continuation] = Tokens()
        self.topics = TopicGate(
            auto_create=settings.server.auto_create_topics,
            submit=self.committer.submit,
            token=self.continuations.put,
            in_storage=functools.partial(topics.topic_exists, self.root),
            on_dropped=self.tailer.forget_topic,
        )
        self.subscriptions = Subscriptions(
            settings,
            self.committer,
            self.tailer,
            self.dispatcher,
            self.topics.when_present,
            self.continuations,
            user_of=self.user_of,
            permissions=self.permissions,
            endpoints=self.endpoints,
            others=self.cluster if self.cluster.several else None,
        )
        self.coordinator = Coordinator(
            txn_rules.Transactions(
                txn_rules.Limits(settings.server.max_transaction_messages, settings.server.max_transaction_bytes)
            ),
            self.committer,
            self.continuations,
            hold_settlement=self.dispatcher.settle_transactional,
            end_settlements=self.dispatcher.discharge,
        )
        self.connections: set[proton.Connection] = set()
        # The other members (connectors/amqp/cluster_port.py): each open frame advertises them;
        # with several, a ClientID is claimed across them. The connections holding such a claim:
        self._claims: dict[proton.Connection, str] = {}
        parts.inbox.connect(self)
        self.cluster.connect(self)

    def user_of(self, conn: proton.Connection) -> str | None:
        """The user ``conn`` authenticated as; None = anonymous."""
        return self.identities.get(conn).user

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Load the catalog, start the committer and tailer threads."""
        self.committer.start()
        self.subscriptions.load()
        self.tailer.keep_warm(self.subscriptions.durable_tables)
        self.tailer.start()

    def stop(self) -> None:
        """Drain pending commits, stop threads."""
        self.committer.stop()
        self.tailer.stop()

    # ------------------------------------------------------------------ cross-thread results

    def run_on_reactor(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the reactor thread (any thread may call this; ``fn`` must not carry
        proton objects across threads: it is a continuation of work begun on the reactor; what
        it raises is logged, not fatal)."""
        self._injector.call(fn)

    def committed(self, results: list[Result]) -> None:
        """A group commit's results (the committer posts them through the parts' Inbox): settle
        the publishers whose messages it stored, then run the other requests' continuations."""
        self._settle_publishers([r for r in results if isinstance(r.request, Publish)])
        for result in results:
            if isinstance(result.request, Publish):
                continue
            then = self.continuations.pop(result.request.token)
            if then is not None:
                try:
                    then(result)
                except Exception:  # one continuation's failure must not end the reactor
                    log.exception("continuation of %s failed", type(result.request).__name__)

    def _settle_publishers(self, results: list[Result]) -> None:
        """Accept (or reject, when the commit failed) each stored publish, then give each
        publisher link the credit its settled messages free."""
        # Per publisher link (its state, hashed by identity: a wrapper hashes through proton):
        # one of its wrappers and the messages settled.
        credit: dict[PublisherLink, tuple[proton.Link, int]] = {}
        for result in results:
            req = result.request
            assert isinstance(req, Publish)
            self.publish_window.committed(len(req.message))
            context = self.publishes.pop(req.token)
            if context is None:  # every publish leaves one; a missing one is a defect, logged
                log.error("no publish context for a committed message of %s", req.topic)
                continue
            transfer, link, state = context.transfer, context.link, context.state
            if result.error is None:
                transfer.accept()
                self.counters.inc(metrics.PUBLISHED, req.topic)
                if req.received:
                    self.stages.observe("publish_accept", time.perf_counter() - req.received)
            else:
                # A typed error (the data dir refused writes: resource-limit-exceeded) carries
                # its condition; anything else is ours.
                err = result.error
                if isinstance(err, SharedSubError):
                    _reject(transfer.delivery, str(err.condition), err.description)
                else:
                    _reject(transfer.delivery, str(AmqpCondition.INTERNAL_ERROR), f"not stored: {err}")
            held = credit.get(state)
            credit[state] = (link, 1) if held is None else (held[0], held[1] + 1)
        now = time.perf_counter()
        for state, (_, n) in credit.items():
            state.pace.settled(n, now)
        window = self.publish_window
        for flowed, n in [*((lk, window.grant(lk, n)) for lk, n in credit.values()), *window.release()]:
            if n and flowed.state & Endpoint.LOCAL_ACTIVE and not flowed.state & Endpoint.REMOTE_CLOSED:
                flowed.flow(n)

    def rows_read(self, key: str, watch: int, rows: list[Row], posted: float) -> None:
        """Rows the tailer read from subscription ``key``'s table in its watch ``watch`` (posted
        at ``posted``, ``time.perf_counter()``; through the parts' Inbox): dispatch them, unless
        that watch ended meanwhile (sharedsub.runtime.tailer: the next watch reads them again)."""
        self.stages.observe("dispatch_wait", time.perf_counter() - posted)
        if self.tailer.current(key, watch):
            self.dispatcher.offer(key, rows)

    # ------------------------------------------------------------------ connections

    # The callbacks below that take proton's Event as Any: proton types its connection, session and
    # link as Optional (one Event class for every event type) and its link as Sender | Receiver, so
    # each callback would need checks of its own before using what its event type always carries.
    @_contained
    def on_connection_remote_open(self, event: Any) -> None:  # Any: proton.Event (see above)
        """Open with the capabilities Qpid JMS looks for (docs/design.md §4.1), or refuse a duplicate container."""
        conn = event.connection
        if not conn.state & Endpoint.LOCAL_UNINIT:
            return
        conn.container = CONTAINER_ID
        try:
            container = conn.remote_container or ""
        except UnicodeDecodeError:
            _refuse_connection(conn, AmqpCondition.INVALID_FIELD, "container-id is not valid UTF-8", field="container-id")
            return
        desired = {str(c) for c in conn.remote_desired_capabilities or []}
        conn.offered_capabilities = proton.SymbolList([symbol(c) for c in CONNECTION_OFFERED])
        sole = Capability.SOLE_CONNECTION in desired
        if sole and any(c.remote_container == container for c in self.connections if c != conn):
            _refuse_client_id(conn, f"container-id {container!r} is already connected; the JMS ClientID must be unique")
            log.info("refused a second connection for container %r", container)
            return
        if sole and self.cluster.several:
            # Several members: the ClientID must be unique across them too (runtime/cluster/member_claims);
            # the answer comes back on this thread, the connection never leaves it.
            self.cluster.claim_container(container, functools.partial(self._claimed, conn, container))
            return
        self._accept_open(conn, container)

    def _claimed(self, conn: proton.Connection, container: str, held: Held | None) -> None:
        """The cluster's answer to a connection's claim of its container id (reactor thread)."""
        if conn.state & Endpoint.REMOTE_CLOSED or conn.transport is None:
            if held is None:
                self.cluster.release_container(container)  # it went away meanwhile
            return
        if held is not None:
            refusal = held.describe(f"container-id {container!r}", "is already connected to")
            _refuse_client_id(conn, refusal)
            log.info("refused a connection for container %r: %s", container, refusal)
            return
        self._claims[conn] = container
        self._accept_open(conn, container)

    def _accept_open(self, conn: proton.Connection, container: str) -> None:
        """Open ``conn`` unless the service has all the connections it may have."""
        cap = self.settings.server.max_connections
        if cap and len(self.connections) >= cap:
            _refuse_connection(
                conn,
                AmqpCondition.RESOURCE_LIMIT_EXCEEDED,
                f"the service has {len(self.connections)} connections, its limit (server.max_connections)",
            )
            log.warning("refused a connection from container %r: server.max_connections (%d) reached", container, cap)
            return
        self.connections.add(conn)
        self.endpoints.connection_opened(conn)
        who = self.identities.get(conn)
        log.debug("connection from container %r, user %r (%s)", container, who.user, who.mechanism or "no SASL")
        if self.settings.server.idle_timeout and conn.transport is not None:
            # Proton advertises this in the open and closes the transport when nothing arrives
            # for that long (on_transport_closed then releases what the connection held).
            conn.transport.idle_timeout = self.settings.server.idle_timeout
        peers = self.cluster.failover_peers()
        if peers:
            # docs/wire.md §1.1: the Qpid JMS client on a failover: URI takes these as the other
            # servers to reconnect to (network-host, port, scheme per server).
            conn.properties = {
                symbol("failover-server-list"): [
                    {symbol("network-host"): host, symbol("port"): port, symbol("scheme"): "amqp"} for host, port in peers
                ]
            }
        conn.open()

    @_contained
    def on_session_remote_open(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """Accept a session, or answer and end it past ``max_sessions_per_connection``."""
        session = event.session
        if not session.state & Endpoint.LOCAL_UNINIT:
            return
        session.open()
        cap = self.settings.server.max_sessions_per_connection
        if cap and _live(session.connection.session_head(0), cap + 1) > cap:
            session.condition = Condition(
                str(AmqpCondition.RESOURCE_LIMIT_EXCEEDED),
                f"this connection has {cap} sessions, the limit (server.max_sessions_per_connection)",
            )
            session.close()

    @_contained
    def on_link_remote_open(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """A new link: a publisher (our receiver) or a consumer (our sender)."""
        link = event.link
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        cap = self.settings.server.max_links_per_connection
        if cap and _live(link.connection.link_head(0), cap + 1) > cap:  # this link included
            refuse(
                link,
                str(AmqpCondition.RESOURCE_LIMIT_EXCEEDED),
                f"this connection has {cap} links, the limit (server.max_links_per_connection)",
            )
            return
        try:
            if is_coordinator(link):
                self.coordinator.open(link)
            elif link.is_receiver:
                self._open_publisher(link)
            elif link.remote_target is None or link.remote_target.type == proton.Terminus.UNSPECIFIED:
                # docs/wire.md §5.48: a receiver attach needs a target.
                refuse(link, str(AmqpCondition.INVALID_FIELD), "received attach with a null target")
            else:
                self.subscriptions.open_consumer(link)
        except SharedSubError as exc:
            _refuse_error(link, exc)
        except UnicodeDecodeError as exc:  # proton decodes terminus strings only when they are read
            _refuse_error(link, InvalidAttach(f"the attach has a string that is not valid UTF-8 ({exc.reason})"))
        except Exception as exc:  # last-resort guard: refuse, log, keep serving
            log.exception("attach of link %r failed", link.name)
            _refuse_error(link, exc)

    # ------------------------------------------------------------------ topics

    def subscription_records(self) -> list[SubscriptionRecord]:
        """The active subscriptions, sorted by key (any thread: the records are copied in one
        step of the interpreter)."""
        return sorted(self.subscriptions.records.copy().values(), key=lambda r: r.key)

    def publishers(self, topic: str) -> int:
        """Publisher links attached with ``topic`` as their target (anonymous relays not counted)."""
        return sum(1 for s in self.endpoints.publishers() if s.address is not None and s.address.topic == topic)

    # ------------------------------------------------------------------ publishers

    def _open_publisher(self, link: proton.Receiver) -> None:
        target_address = link.remote_target.address
        container = link.connection.remote_container or ""
        address = addressing.parse_address(target_address) if target_address else None
        user = self.user_of(link.connection)
        policy = self.permissions.policy
        if address is not None:
            policy.check(user, Permission.PUBLISH, address.topic)  # Unauthorized refuses the attach

        def ready(error: BaseException | None) -> None:
            if error is not None:
                _refuse_error(link, error)
                return
            self.endpoints.set_link(link, PublisherLink(address, container, user, policy if address is not None else None))
            link.source.copy(link.remote_source)
            link.target.copy(link.remote_target)
            link.snd_settle_mode = link.remote_snd_settle_mode  # a pre-settling publisher is answered as such
            if self.settings.server.max_message_size:
                # Advertised so clients refuse oversized sends themselves (Qpid JMS does).
                link.max_message_size = self.settings.server.max_message_size
            link.open()
            link.flow(self.publish_window.grant(link, self.settings.publish.credit))

        if address is None:
            ready(None)  # anonymous relay: each message names its topic
        else:
            self.topics.when_present(address.topic, ready)

    def _on_published(
        self, transfer: Transfer | DeliveryTransfer, link: proton.Receiver, state: PublisherLink | None,
    ) -> None:
        """Decode, check and queue for commit the complete ``transfer`` of ``link``, whose
        publisher state is ``state`` (None: the link is not an attached publisher)."""
        received = time.perf_counter()
        if state is None:
            # A transfer before the attach was answered (no credit was given): a protocol
            # violation, which ends only this connection. The transfer is read and dropped so
            # the link moves past it (one left in place would hold back every later one).
            link.recv(transfer.pending)
            link.advance()
            transfer.delivery.settle()
            conn = link.connection
            if not conn.state & Endpoint.LOCAL_CLOSED:
                conn.condition = Condition(str(AmqpCondition.NOT_ALLOWED), "transfer on a link that is not attached yet")
                conn.close()
            return
        data = link.recv(transfer.pending)  # None: the transfer has no payload at all
        link.advance()
        try:
            if not data:  # not a message: AMQP 1.0 §3.2 requires a body section
                raise MessageDecodeError("the transfer carries no message (empty payload)")
            try:
                # Refuses what check_encoding, proton's decoder and message_columns refused.
                decoded = amqp_message.decode(data)
            except SharedSubError:
                raise
            except Exception as exc:  # a decoder defect: refuse this transfer, keep the link
                raise MessageDecodeError(f"transfer is not a valid AMQP message: {exc!r}") from exc
            address = state.address or addressing.parse_address(decoded.to)
            topic = address.topic
            policy = self.permissions.policy
            if policy is not state.authorized_under:
                policy.check(state.user, Permission.PUBLISH, topic)  # Unauthorized rejects it
                if state.address is not None:
                    state.authorized_under = policy
            self.topics.ensure(topic)  # a creation is queued ahead of the publish
            columns = topic_columns(decoded, address, publisher=state.container, size=len(data))
            if transfer.remote_state == TRANSACTIONAL_STATE:
                txn_id = transaction_of(transfer.delivery)
                if txn_id is not None:
                    # Held until the transaction is discharged (connectors/amqp/transactions.py).
                    self.coordinator.enlist_publish(transfer.delivery, txn_id, Publish(topic, columns, data, None))
                    link.flow(1)
                    return
        except SharedSubError as exc:
            _reject(transfer.delivery, str(exc.condition), exc.description)
            link.flow(1)
            return
        self.publish_window.queued(len(data))
        # link.credit: what the publisher may still send; none left, it waits for this group.
        awaited = state.pace.arrived(received, self.settings.publish.sync_send_gap, link.credit)
        token = self.publishes.put(PublishContext(transfer, link, state))
        self.committer.submit(Publish(topic, columns, data, token, received, awaited, state.pace.wants_company(received)))
        self.stages.observe("decode", time.perf_counter() - received)

    def _oversized(self, transfer: Transfer | DeliveryTransfer, link: proton.Receiver) -> bool:
        """True when ``transfer`` is larger than ``max_message_size``; its bytes are then read and
        dropped as they arrive, so an oversized transfer never sits in memory whole."""
        limit = self.settings.server.max_message_size
        if not limit:
            return False
        # Only while some transfer is oversized is the delivery wrapped to be looked up.
        if not (self.endpoints.any_oversized() and self.endpoints.oversized(transfer.delivery)):
            if transfer.pending <= limit:
                return False
            self.endpoints.mark_oversized(transfer.delivery)
        link.recv(transfer.pending)
        return True

    def _refuse_oversized(self, dlv: Delivery, link: proton.Receiver) -> None:
        """Reject a complete oversized transfer; the link stays open for further messages."""
        # Past it before it is settled: settling the link's current delivery advances the link
        # itself, and an advance after that would step over the next delivery, unread (seen
        # once reads grew past 8 KiB: the next message arrived with the oversized one's end).
        link.advance()
        error = MessageTooLarge(self.settings.server.max_message_size)
        dlv.local.condition = Condition(str(error.condition), error.description)
        dlv.update(Delivery.REJECTED)
        self.endpoints.done_oversized(dlv)
        dlv.settle()
        link.flow(1)

    @_contained
    def on_delivery(self, event: proton.Event | MessageEvent) -> None:
        """Incoming transfer (publish) or a consumer's disposition."""
        # An attached link's wrapper is kept (EndpointState): found by the event's C object, the
        # link is not wrapped again for every message.
        found = self.endpoints.attached(link_key_of(event))
        # A Receiver on the publish path, a Sender on the acknowledgement path; proton.Event's link is Optional.
        link: Any  # Any: proton's is_receiver does not narrow the Link type, and this path takes no checks
        link, known = found if found is not None else (event.link, None)
        if isinstance(known, PublisherLink) or (known is None and link.is_receiver):
            # Proton queues a DELIVERY event for a delivery with each of its transfer frames, so
            # the frame that completes a delivery is followed by an event for it: this event's
            # delivery is handled when it is the link's current one (readable) and complete;
            # later deliveries have events of their own (tests/unit/test_delivery_events.py holds
            # proton to that). Reading only this one spares a wrapper per message (link.current).
            transfer = transfer_of(event)
            if not transfer.readable:
                return  # read already, at an event of an earlier frame of it
            if self._oversized(transfer, link):
                if not transfer.partial:
                    self._refuse_oversized(transfer.delivery, link)
                return
            if transfer.partial:
                return  # the rest comes with a later frame, and an event of its own
            if known is None and self.coordinator.is_coordinator_link(link):
                self.coordinator.on_transfer(transfer.delivery)
            else:
                self._on_published(transfer, link, known if isinstance(known, PublisherLink) else None)
            return
        transfer = transfer_of(event)
        if transfer.remote_state == TRANSACTIONAL_STATE:
            dlv = transfer.delivery
            try:
                txn_id = transaction_of(dlv)
            except SharedSubError:
                txn_id = None  # a malformed transactional-state: judged as the plain settlement it is
            if txn_id is not None:
                self.coordinator.settlement(dlv, txn_id)
                return
        # No outcome yet (no state, not settled) is the dispatcher's to ignore, as it checks anyway.
        # Applied at the end of this run of delivery events (on_deliveries_done): a consumer's
        # acknowledgements come many to a frame, and one event per subscription for them all cost
        # the reactor less than one each (bench/RESULTS.md, issue 31).
        self.dispatcher.settle_later(transfer)

    def on_deliveries_done(self) -> None:
        """The engine loop's pump ended a run of delivery events: apply the dispositions kept
        (a subscription's failure there is logged, no connection closed: Dispatcher.apply_settled)."""
        self.dispatcher.apply_settled()

    @_contained
    def on_link_flow(self, event: Any) -> None:  # Any: proton.Event's link is Optional; this path takes no checks
        """Credit arrived on a consumer link: dispatch."""
        found = self.endpoints.attached(link_key_of(event))
        link, state = found if found is not None else (event.link, None)
        if isinstance(state, ConsumerLink):
            self.dispatcher.credit_arrived(link)
        if link.is_sender and link.drain_mode and link.credit > 0 and link.state & Endpoint.LOCAL_ACTIVE:
            # Nothing more to send now: give the rest of the credit back (flow with drain, credit 0,
            # delivery-count advanced). Qpid JMS drains for receive(timeout)/receiveNoWait() with
            # prefetch 0 and when it stops a consumer, and fails the consumer when no answer comes.
            link.drained()
            if isinstance(state, ConsumerLink):
                self.dispatcher.credit_drained(link)

    # ------------------------------------------------------------------ closing

    def _reply_detach(self, link: proton.Link, closed: bool, condition: Condition | None) -> None:
        if link.state & Endpoint.LOCAL_CLOSED:
            return
        if condition is not None:
            link.condition = condition
        if closed:
            link.close()
        else:
            link.detach()

    @_contained
    def on_link_remote_close(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """Detach closed=true."""
        link = event.link
        if link.is_receiver:
            self.coordinator.link_gone(link)
            self.endpoints.drop_link(link)
            self._reply_detach(link, True, None)
            return
        self.subscriptions.consumer_gone(
            link, closed=True, reply=lambda closed, cond: self._reply_detach(link, closed, cond)
        )

    @_contained
    def on_link_remote_detach(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """Detach closed=false."""
        link = event.link
        self.coordinator.link_gone(link)
        if link.is_receiver:
            self.endpoints.drop_link(link)
        self.subscriptions.consumer_gone(
            link, closed=False, reply=lambda closed, cond: self._reply_detach(link, closed, cond)
        )

    @_contained
    def on_session_remote_close(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """Session end: its links go with it."""
        session = event.session
        self._links_gone(session.connection, session=session)
        self.subscriptions.scope_ended("session", session)
        if not session.state & Endpoint.LOCAL_CLOSED:
            session.close()

    @_contained
    def on_connection_remote_close(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """Connection close: its links go."""
        self._connection_gone(event.connection)
        if not event.connection.state & Endpoint.LOCAL_CLOSED:
            event.connection.close()

    @_contained
    def on_transport_closed(self, event: Any) -> None:  # Any: proton.Event (see on_connection_remote_open)
        """Connection lost: its links go."""
        if event.connection is not None:
            self._connection_gone(event.connection)

    def _connection_gone(self, conn: proton.Connection) -> None:
        container = self._claims.pop(conn, None)
        if container is not None:
            self.cluster.release_container(container)
        if conn not in self.connections:
            return
        self._links_gone(conn)
        self.coordinator.connection_gone(conn)
        self.connections.discard(conn)
        ssn = conn.session_head(0)
        while ssn is not None:
            self.subscriptions.scope_ended("session", ssn)
            ssn = ssn.next(0)
        self.subscriptions.scope_ended("connection", conn)
        self.endpoints.drop_connection(conn)

    def _links_gone(self, conn: proton.Connection, session: proton.Session | None = None) -> None:
        link = conn.link_head(0)
        while link is not None:
            if session is None or link.session == session:
                self.coordinator.link_gone(link)
                if link.is_receiver:
                    self.endpoints.drop_link(link)
                self.subscriptions.consumer_gone(
                    link,
                    closed=False,
                    reply=_no_reply,  # the session or connection is gone: nothing to answer
                    session_ending=True,
                    connection_closing=session is None,
                )
            link = link.next(0)


_R = TypeVar("_R")

Operation = Callable[[FrontEnd, concurrent.futures.Future[_R]], None]
"""Work another thread runs on the front end's thread (connectors.amqp.server.FrontEndServer.call):
``op(front_end, future)`` completes ``future`` at once or from a later continuation; the future's
value is typed per operation (``Operation[T]``)."""
