"""The AMQP front end: a proton handler that translates link events, calls the core, applies results.

It never evaluates selectors and never fans out (DESIGN §1): it decides attaches, hands published
messages to the :class:`~sharedsub.committer.Committer` (settling each publisher delivery only after
the Delta commit that holds it), and delivers what the fan-out job wrote to subscription tables.

Work done on other threads (commits, table reads) comes back through one ``EventInjector`` as
``ApplicationEvent``s, so every proton object is touched on the reactor thread only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import proton
from proton import Condition, Delivery, Endpoint, Terminus, symbol
from proton import Handler
from proton.reactor import ApplicationEvent, EventInjector

from sharedsub import addressing
from sharedsub.committer import Committer, CreateTopic, Publish, Result, SaveSubscription
from sharedsub.conditions import (
    CONNECTION_OFFERED,
    NO_LOCAL_FILTER_CODE,
    NO_LOCAL_FILTER_SYMBOLS,
    SELECTOR_FILTER_CODE,
    SELECTOR_FILTER_SYMBOLS,
    AmqpCondition,
    Capability,
)
from sharedsub.config import Settings
from sharedsub.errors import MessageDecodeError, NotSupported, SharedSubError, TopicNotFound
from sharedsub.model import ExpiryPolicy, SubscriptionKey, SubscriptionRecord, SubscriptionState
from sharedsub.payloads import PayloadCache
from sharedsub.storage import delta

from connectors.amqp import translate
from connectors.amqp.delivery import Dispatcher, Row, Tailer

log = logging.getLogger(__name__)

_EXPIRY = {
    Terminus.EXPIRE_WITH_LINK: ExpiryPolicy.LINK_DETACH,
    Terminus.EXPIRE_WITH_SESSION: ExpiryPolicy.SESSION_END,
    Terminus.EXPIRE_WITH_CONNECTION: ExpiryPolicy.CONNECTION_CLOSE,
    Terminus.EXPIRE_NEVER: ExpiryPolicy.NEVER,
}


@dataclasses.dataclass(slots=True)
class PublisherLink:
    """State of a link on which a client publishes (our receiver)."""

    address: addressing.Address | None  # None: anonymous relay, topic from properties.to
    container: str
    uncredited: int = 0


@dataclasses.dataclass(slots=True)
class ConsumerLink:
    """State of a link on which a client consumes (our sender)."""

    record: SubscriptionRecord


def _refuse(link: proton.Link, error: SharedSubError) -> None:
    """Refuse an attach: null terminus in the reply, then detach closed=true with the condition."""
    log.info("refusing link %r: %s %s", link.name, error.condition, error.description)
    if link.state & Endpoint.LOCAL_UNINIT:
        link.open()
    link.condition = Condition(str(error.condition), error.description)
    link.close()


def _filters(source: Terminus) -> tuple[str | None, bool, list[Any]]:
    """(selector, no_local, other filters) from a source filter map, matched by descriptor."""
    selector: str | None = None
    no_local = False
    others = []
    entries = source.filter.get_object() if source.filter is not None else None
    for value in (entries or {}).values():
        descriptor = getattr(value, "descriptor", None)
        if descriptor == SELECTOR_FILTER_CODE or descriptor in SELECTOR_FILTER_SYMBOLS:
            text = value.value
            selector = text if isinstance(text, str) and text.strip() else None
        elif descriptor == NO_LOCAL_FILTER_CODE or descriptor in NO_LOCAL_FILTER_SYMBOLS:
            no_local = True
        else:
            others.append(descriptor)
    return selector, no_local, others


def _set_capabilities(terminus: Terminus, caps: list[str]) -> None:
    data = terminus.capabilities
    data.clear()
    data.put_array(False, proton.Data.SYMBOL)
    data.enter()
    for c in caps:
        data.put_symbol(c)
    data.exit()


class FrontEnd(Handler):
    """The proton handler of ``sharedsub serve`` / ``sharedsub frontend``."""

    def __init__(self, settings: Settings, injector: EventInjector) -> None:
        super().__init__()
        self.settings = settings
        self.root = settings.data_dir
        self._injector = injector
        self.cache = PayloadCache(settings.delivery.payload_cache_bytes)
        self.committer = Committer(
            self.root,
            cache=self.cache,
            on_done=self._post_results,
            max_batch_messages=settings.publish.max_batch_messages,
            max_batch_bytes=settings.publish.max_batch_bytes,
        )
        self.tailer = Tailer(self.root, self.cache, self._post_rows, poll_interval=settings.delivery.poll_interval)
        self.dispatcher = Dispatcher(self.tailer.sent)
        self._known_topics: set[str] = set()
        self._pending_topic: dict[str, list[Callable[[BaseException | None], None]]] = {}
        self.published = 0
        self.connections: set[proton.Connection] = set()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the committer and tailer threads."""
        self.committer.start()
        self.tailer.start()

    def stop(self) -> None:
        """Drain pending commits, stop threads."""
        self.committer.stop()
        self.tailer.stop()

    # ------------------------------------------------------------------ cross-thread results

    def _post_results(self, results: list[Result]) -> None:
        self._injector.trigger(ApplicationEvent("sharedsub_committed", subject=results))

    def _post_rows(self, key: str, rows: list[Row]) -> None:
        self._injector.trigger(ApplicationEvent("sharedsub_rows", subject=(key, rows)))

    def on_sharedsub_committed(self, event: Any) -> None:
        """Settle publishers whose messages are committed; run attach continuations."""
        credit: dict[proton.Link, int] = {}
        for result in event.subject:
            req = result.request
            if isinstance(req, Publish):
                dlv: Delivery = req.token
                if result.error is None:
                    dlv.update(Delivery.ACCEPTED)
                    self.published += 1
                else:
                    dlv.local.condition = Condition(str(AmqpCondition.INTERNAL_ERROR), f"not stored: {result.error}")
                    dlv.update(Delivery.REJECTED)
                dlv.settle()
                link = dlv.link
                credit[link] = credit.get(link, 0) + 1
            else:
                req.token(result)
        for link, n in credit.items():
            if link.state & Endpoint.LOCAL_ACTIVE and not link.state & Endpoint.REMOTE_CLOSED:
                link.flow(n)

    def on_sharedsub_rows(self, event: Any) -> None:
        """Rows read from a subscription table: dispatch them."""
        key, rows = event.subject
        self.dispatcher.offer(key, rows)

    # ------------------------------------------------------------------ connections

    def on_connection_remote_open(self, event: Any) -> None:
        """Open with the capabilities Qpid JMS looks for (DESIGN §4.1)."""
        conn = event.connection
        self.connections.add(conn)
        if conn.state & Endpoint.LOCAL_UNINIT:
            conn.offered_capabilities = proton.SymbolList([symbol(c) for c in CONNECTION_OFFERED])
            conn.open()

    def on_session_remote_open(self, event: Any) -> None:
        """Accept every session."""
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()

    def on_link_remote_open(self, event: Any) -> None:
        """A new link: a publisher (our receiver) or a consumer (our sender)."""
        link = event.link
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        try:
            if link.is_receiver:
                self._open_publisher(link)
            else:
                self._open_consumer(link)
        except SharedSubError as exc:
            _refuse(link, exc)
        except Exception as exc:  # last-resort guard: refuse, log, keep serving
            log.exception("attach of link %r failed", link.name)
            _refuse(link, SharedSubError(f"internal error: {exc}"))

    # ------------------------------------------------------------------ topics

    def _with_topic(self, topic: str, then: Callable[[BaseException | None], None]) -> None:
        """Run ``then(None)`` once ``topic`` exists (creating it when allowed), else ``then(error)``."""
        if topic in self._known_topics or delta.topic_exists(self.root, topic):
            self._known_topics.add(topic)
            then(None)
            return
        if not self.settings.server.auto_create_topics:
            then(TopicNotFound(topic))
            return
        waiting = self._pending_topic.setdefault(topic, [])
        waiting.append(then)
        if len(waiting) == 1:

            def created(result: Result) -> None:
                if result.error is None:
                    self._known_topics.add(topic)
                for cont in self._pending_topic.pop(topic, []):
                    cont(result.error)

            self.committer.submit(CreateTopic(topic, created))

    # ------------------------------------------------------------------ publishers

    def _open_publisher(self, link: proton.Receiver) -> None:
        target_address = link.remote_target.address
        container = link.connection.remote_container or ""
        address = addressing.parse_address(target_address) if target_address else None

        def ready(error: BaseException | None) -> None:
            if error is not None:
                _refuse(link, error if isinstance(error, SharedSubError) else SharedSubError(str(error)))
                return
            link.ss = PublisherLink(address, container)
            link.source.copy(link.remote_source)
            link.target.copy(link.remote_target)
            link.open()
            link.flow(self.settings.publish.credit)

        if address is None:
            ready(None)  # anonymous relay: each message names its topic
        else:
            self._with_topic(address.topic, ready)

    def _on_published(self, dlv: Delivery) -> None:
        link = dlv.link
        state: PublisherLink = link.ss
        data = link.recv(dlv.pending)
        link.advance()
        try:
            msg = proton.Message()
            try:
                msg.decode(data)
            except Exception as exc:
                raise MessageDecodeError(f"transfer is not a valid AMQP message: {exc}") from exc
            address = state.address or addressing.parse_address(msg.address)
            topic = address.topic
            if topic not in self._known_topics:
                if delta.topic_exists(self.root, topic):
                    self._known_topics.add(topic)
                elif self.settings.server.auto_create_topics:
                    self.committer.submit(CreateTopic(topic, lambda _r: self._known_topics.add(topic)))
                else:
                    raise TopicNotFound(topic)
            columns = translate.message_columns(msg)
            props = msg.properties or {}
            columns["routing_key"] = addressing.routing_key(address, props, msg.subject)
            columns["publisher"] = state.container
            columns["partition"] = 0
            columns["size"] = len(data)
        except SharedSubError as exc:
            dlv.local.condition = Condition(str(exc.condition), exc.description)
            dlv.update(Delivery.REJECTED)
            dlv.settle()
            link.flow(1)
            return
        self.committer.submit(Publish(topic, columns, data, dlv))

    def on_delivery(self, event: Any) -> None:
        """Incoming transfer (publish) or a consumer's disposition."""
        dlv = event.delivery
        link = dlv.link
        if link.is_receiver:
            # Drain every complete delivery at the head of the link, not only this event's:
            # it keeps working however proton groups the delivery events.
            current = link.current
            while current is not None and current.readable and not current.partial:
                self._on_published(current)
                current = link.current
            return
        if dlv.remote_state or dlv.settled:
            self._on_disposition(dlv)

    # ------------------------------------------------------------------ consumers

    def _open_consumer(self, link: proton.Sender) -> None:
        source = link.remote_source
        if source.dynamic:
            raise NotSupported("dynamic sources are not supported on topics")
        if source.address is None:
            # Null-source lookup (unsubscribe / recovery) comes with the subscription catalog.
            raise _NoSubscription(link.name)
        address = addressing.parse_address(source.address)
        selector, no_local, _unknown = _filters(source)
        if selector is not None:
            raise NotSupported(f"JMS selectors are not supported yet (selector {selector!r})")
        container = link.connection.remote_container or ""
        now = dt.datetime.now(dt.UTC)
        record = SubscriptionRecord(
            identity=SubscriptionKey(container, f"{link.name}#{uuid.uuid4().hex}", shared=False, durable=False),
            generation=1,
            state=SubscriptionState.ACTIVE,
            topic=address.topic,
            binding=addressing.binding_of(address),
            selector=None,
            no_local=no_local,
            expiry_policy=_EXPIRY.get(source.expiry_policy, ExpiryPolicy.SESSION_END),
            start_seq=0,
            source=json.dumps({"address": source.address, "no_local": no_local}),
            created_at=now,
            updated_at=now,
        )

        def saved(result: Result) -> None:
            if result.error is not None:
                _refuse(link, SharedSubError(f"could not store the subscription: {result.error}"))
                return
            rec: SubscriptionRecord = result.value
            if link.state & Endpoint.REMOTE_CLOSED:
                self._delete(rec)
                return
            link.ss = ConsumerLink(rec)
            link.source.copy(source)
            _set_capabilities(link.source, [Capability.TOPIC])
            link.target.copy(link.remote_target)
            link.open()
            self.tailer.watch(rec.key, rec.table, rec.topic)
            self.dispatcher.add_consumer(rec.key, link)
            log.info("consumer %r attached to %s (start seq %d)", link.name, rec.topic, rec.start_seq)

        def topic_ready(error: BaseException | None) -> None:
            if error is not None:
                _refuse(link, error if isinstance(error, SharedSubError) else SharedSubError(str(error)))
                return
            self.committer.submit(SaveSubscription(record, assign_start=True, token=saved))

        self._with_topic(address.topic, topic_ready)

    def _on_disposition(self, dlv: Delivery) -> None:
        key, row = getattr(dlv, "ss_row", (None, None))
        state = dlv.remote_state
        if key is not None and state in (Delivery.RELEASED, Delivery.MODIFIED):
            self.dispatcher.requeue(key, row)
        dlv.settle()

    def on_link_flow(self, event: Any) -> None:
        """Credit arrived on a consumer link: dispatch."""
        link = event.link
        if link.is_sender:
            state = getattr(link, "ss", None)
            if isinstance(state, ConsumerLink):
                self.dispatcher.dispatch(state.record.key)

    def _consumer_gone(self, link: proton.Link) -> None:
        state = getattr(link, "ss", None)
        if not isinstance(state, ConsumerLink):
            return
        link.ss = None
        rec = state.record
        left = self.dispatcher.remove_consumer(rec.key, link)
        if left == 0 and not rec.identity.durable:
            self._delete(rec)

    def _delete(self, rec: SubscriptionRecord) -> None:
        self.tailer.unwatch(rec.key)
        self.dispatcher.drop(rec.key)
        gone = dataclasses.replace(rec, state=SubscriptionState.DELETED)
        self.committer.submit(SaveSubscription(gone, assign_start=False, token=lambda _r: None))

    # ------------------------------------------------------------------ closing

    def on_link_remote_close(self, event: Any) -> None:
        """Detach closed=true: forget the link, answer with a close."""
        link = event.link
        self._consumer_gone(link)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.close()

    def on_link_remote_detach(self, event: Any) -> None:
        """Detach closed=false: a plain subscription ends with its link (expiry link-detach)."""
        link = event.link
        self._consumer_gone(link)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.close()

    def on_session_remote_close(self, event: Any) -> None:
        """Session end: its links go."""
        self._links_gone(event.session.connection, session=event.session)
        if not event.session.state & Endpoint.LOCAL_CLOSED:
            event.session.close()

    def on_connection_remote_close(self, event: Any) -> None:
        """Connection close: its links go."""
        self._links_gone(event.connection)
        self.connections.discard(event.connection)
        if not event.connection.state & Endpoint.LOCAL_CLOSED:
            event.connection.close()

    def on_transport_closed(self, event: Any) -> None:
        """Connection lost: its links go."""
        conn = event.connection
        if conn is not None:
            self._links_gone(conn)
            self.connections.discard(conn)

    def _links_gone(self, conn: proton.Connection, session: proton.Session | None = None) -> None:
        link = conn.link_head(0)
        while link is not None:
            if session is None or link.session == session:
                self._consumer_gone(link)
            link = link.next(0)


class _NoSubscription(SharedSubError):
    """Null-source lookup of a subscription that does not exist."""

    condition = AmqpCondition.NOT_FOUND

    def __init__(self, link_name: str) -> None:
        super().__init__(f"no subscription link found for {link_name!r}")
