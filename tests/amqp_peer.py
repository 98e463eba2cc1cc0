"""Real python-qpid-proton clients for the end-to-end tests.

``publish`` runs a sender to completion and returns each message's outcome; ``Subscriber`` runs a
receiver on its own thread and records every transfer's raw bytes, so tests can check byte
fidelity and wait on conditions (never on sleeps).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import proton
from proton import Delivery, Endpoint, Message
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

from connectors.amqp.translate import read_symbols


@dataclasses.dataclass
class Outcome:
    """The broker's disposition of one published message."""

    state: str  # accepted | rejected | released | modified
    condition: str | None = None
    description: str | None = None


def uid(prefix: str) -> str:
    """A unique name for a test's topic, subscription or container."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(predicate: Callable[[], bool], timeout: float, what: str = "condition") -> None:
    """Poll ``predicate`` until true or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)


_STATES = {
    Delivery.ACCEPTED: "accepted",
    Delivery.REJECTED: "rejected",
    Delivery.RELEASED: "released",
    Delivery.MODIFIED: "modified",
}


class _Publisher(MessagingHandler):
    def __init__(self, url: str, address: str | None, messages: list[Message | bytes], container_id: str | None) -> None:
        super().__init__(auto_settle=True)
        self.url, self.address, self.messages = url, address, messages
        self.container_id = container_id
        self.outcomes: list[Outcome | None] = [None] * len(messages)
        self.sent = 0
        self.error: str | None = None
        self.remote_max_message_size: int | None = None
        self._tags: dict[str, int] = {}

    def on_link_opened(self, event: Any) -> None:
        self.remote_max_message_size = int(event.link.remote_max_message_size)

    def on_start(self, event: Any) -> None:
        conn = event.container.connect(self.url, reconnect=False)
        event.container.create_sender(conn, self.address)

    def on_sendable(self, event: Any) -> None:
        snd = event.sender
        while snd.credit and self.sent < len(self.messages):
            m = self.messages[self.sent]
            if isinstance(m, Message):
                dlv = snd.send(m)
            else:
                dlv = snd.delivery(str(self.sent))
                snd.stream(m)
                snd.advance()
            self._tags[str(dlv.tag)] = self.sent
            self.sent += 1

    def on_settled(self, event: Any) -> None:
        dlv = event.delivery
        idx = self._tags.get(str(dlv.tag))
        if idx is None:
            return
        cond = dlv.remote.condition
        self.outcomes[idx] = Outcome(
            _STATES.get(dlv.remote_state, str(dlv.remote_state)),
            cond.name if cond else None,
            cond.description if cond else None,
        )
        if all(o is not None for o in self.outcomes):
            event.connection.close()

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.error = f"{cond.name}: {cond.description}" if cond else "link closed"
        event.connection.close()

    def on_transport_error(self, event: Any) -> None:
        self.error = str(event.transport.condition)


def publish(
    url: str,
    address: str | None,
    messages: list[Message | bytes],
    *,
    container_id: str | None = None,
    timeout: float = 60.0,
    link_info: dict[str, Any] | None = None,
) -> list[Outcome]:
    """Send ``messages`` (Message objects or encoded bytes) and return their outcomes.

    ``link_info``, when given, receives ``max_message_size``: what the broker's attach advertised.

    Raises:
        AssertionError: the link was refused or not every message was settled in time.
    """
    handler = _Publisher(url, address, messages, container_id)
    container = Container(handler)
    if container_id:
        container.container_id = container_id
    container.timeout = timeout
    done = threading.Event()
    thread = threading.Thread(target=lambda: (container.run(), done.set()), daemon=True)
    thread.start()
    if not done.wait(timeout):
        raise AssertionError(f"publish to {address!r} did not finish in {timeout} s ({handler.sent} sent)")
    if handler.error:
        raise AssertionError(f"publish to {address!r} refused: {handler.error}")
    if link_info is not None:
        link_info["max_message_size"] = handler.remote_max_message_size
    return [o for o in handler.outcomes if o is not None]


class PublishRun:
    """A ``publish`` running on its own thread, watched while it runs (``start_publish``)."""

    def __init__(self, handler: _Publisher, thread: threading.Thread, done: threading.Event, address: str | None) -> None:
        self._handler, self._thread, self._done, self._address = handler, thread, done, address

    @property
    def sent(self) -> int:
        """Messages transferred so far."""
        return self._handler.sent

    @property
    def settled(self) -> list[Outcome]:
        """Outcomes of the messages the broker settled so far."""
        return [o for o in list(self._handler.outcomes) if o is not None]

    def wait(self, timeout: float = 60.0) -> list[Outcome]:
        """Wait for every outcome (as ``publish`` returns them).

        Raises:
            AssertionError: the link was refused or not every message was settled in time.
        """
        if not self._done.wait(timeout):
            raise AssertionError(
                f"publish to {self._address!r}: {len(self.settled)} of {self._handler.sent} settled in {timeout} s"
            )
        if self._handler.error:
            raise AssertionError(f"publish to {self._address!r} refused: {self._handler.error}")
        return self.settled


def start_publish(url: str, address: str | None, messages: list[Message | bytes]) -> PublishRun:
    """Start sending ``messages`` on a thread of its own; the run ends when all are settled (the
    handler then closes its connection) or the link or connection fails."""
    handler = _Publisher(url, address, messages, None)
    container = Container(handler)
    done = threading.Event()
    thread = threading.Thread(target=lambda: (container.run(), done.set()), daemon=True)
    thread.start()
    return PublishRun(handler, thread, done, address)


@dataclasses.dataclass
class Received:
    """One transfer as it arrived."""

    raw: bytes
    message: Message
    delivery_count: int
    presettled: bool = False  # the broker sent it settled (at-most-once)


class Subscriber(threading.Thread):
    """A receiver on its own connection and thread. Use as a context manager."""

    def __init__(
        self,
        url: str,
        address: str | None,
        *,
        name: str | None = None,
        container_id: str | None = None,
        credit: int = 100,
        settle: str | Callable[[Received], str] = "accept",  # see _settle
        configure: Callable[[proton.Link], None] | None = None,
        capabilities: list[str] | None = None,
        durable: int | None = None,
        expiry: str | None = None,
        selector: str | None = None,
        no_local: bool = False,
        refill: bool = False,
    ) -> None:
        super().__init__(daemon=True)
        self.url, self.address = url, address
        self.link_name = name or f"sub-{uuid.uuid4().hex[:8]}"
        self.container_id = container_id or f"c-{uuid.uuid4().hex[:8]}"
        self.credit = credit
        self.refill = refill  # keep `credit` as a window: one more credit per message received
        self.settle = settle
        self.configure = _source_setup(capabilities, durable, expiry, selector, no_local, configure)
        self.received: list[Received] = []
        self.remote_closed: tuple[str | None, str | None] | None = None  # (condition, description) of the broker's close
        self.remote_detached = threading.Event()
        self.attached = threading.Event()
        self.closed = threading.Event()
        self.disconnected = threading.Event()  # the connection's transport ended (however)
        self.remote_source: dict[str, Any] = {}
        self.error: tuple[str, str] | None = None
        self.undecodable: list[str] = []  # deliveries that were not AMQP messages (rejected)
        self._injector = EventInjector()
        self._link: Any = None
        self._conn: Any = None
        self._detaching = False
        handler = self

        class _H(MessagingHandler):
            def __init__(self) -> None:
                super().__init__(prefetch=0, auto_accept=False, auto_settle=True)

            def on_start(self, event: Any) -> None:
                handler._conn = event.container.connect(handler.url, reconnect=False)
                rcv = event.container.create_receiver(
                    handler._conn, handler.address, name=handler.link_name, options=_Configure(handler.configure)
                )
                handler._link = rcv
                rcv.flow(handler.credit)

            def on_link_opened(self, event: Any) -> None:
                src = event.link.remote_source
                handler.remote_source = {
                    "address": src.address,
                    "capabilities": list(read_symbols(src.capabilities)),
                    "durable": src.durability,
                    "expiry": src.expiry_policy,
                    "is_null": src.type == proton.Terminus.UNSPECIFIED,
                }
                if src.address is not None:
                    handler.attached.set()

            def on_delivery(self, event: Any) -> None:
                dlv = event.delivery
                if not dlv.readable or dlv.partial:
                    return
                link = dlv.link
                raw = link.recv(dlv.pending)
                link.advance()
                if handler._detaching:
                    return  # like a closed JMS consumer: not handed to the app, left unsettled
                msg = Message()
                try:
                    if not raw:  # proton's recv gives None for a transfer with no payload
                        raise ValueError("a delivery with no payload")
                    msg.decode(raw)
                except Exception as exc:  # the broker sent what is not a message: a test failure
                    handler.undecodable.append(f"{exc!r} ({len(raw or b'')} bytes)")
                    _settle(dlv, "reject")
                    return
                handler.received.append(Received(raw, msg, msg.delivery_count, bool(dlv.settled)))
                if handler.refill:
                    link.flow(1)
                got = handler.received[-1]
                _settle(dlv, handler.settle(got) if callable(handler.settle) else handler.settle)

            def on_link_error(self, event: Any) -> None:
                cond = event.link.remote_condition
                handler.remote_closed = (cond.name, cond.description) if cond else (None, None)
                if not handler.attached.is_set():
                    handler.error = (cond.name, cond.description) if cond else ("closed", "")
                handler.closed.set()

            def on_link_closed(self, event: Any) -> None:
                if handler.remote_closed is None:
                    handler.remote_closed = (None, None)
                handler.closed.set()

            def on_transport_closed(self, event: Any) -> None:
                handler.disconnected.set()

            def on_link_closing(self, event: Any) -> None:
                if handler.remote_closed is None:
                    handler.remote_closed = (None, None)
                handler.closed.set()

            def on_link_remote_detach(self, event: Any) -> None:
                cond = event.link.remote_condition
                handler.remote_closed = (cond.name, cond.description) if cond else (None, None)
                handler.remote_detached.set()
                handler.closed.set()

            def on_sharedsub_detach(self, event: Any) -> None:
                handler._detaching = True
                if handler._link is not None:
                    handler._link.detach() if not event.subject else handler._link.close()

            def on_sharedsub_end_session(self, event: Any) -> None:
                handler._detaching = True
                if handler._link is not None:
                    handler._link.session.close()

            def on_sharedsub_drop(self, event: Any) -> None:
                # No close frame: the broker sees the socket end, as when a client dies.
                handler._detaching = True
                if handler._conn is not None:
                    transport = handler._conn.transport
                    transport.close_head()
                    transport.close_tail()

            def on_sharedsub_flow(self, event: Any) -> None:
                if handler._link is not None:
                    handler._link.flow(event.subject)

            def on_sharedsub_close(self, event: Any) -> None:
                if handler._conn is not None and handler._conn.state & Endpoint.LOCAL_ACTIVE:
                    handler._conn.close()
                handler._injector.close()

            def on_transport_error(self, event: Any) -> None:
                handler.error = ("transport", str(event.transport.condition))
                handler.closed.set()

        self._container = Container(_H())
        self._container.container_id = self.container_id
        self._container.selectable(self._injector)

    def run(self) -> None:
        self._container.run()
        self.closed.set()

    def __enter__(self) -> Subscriber:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_attached(self, timeout: float = 30.0) -> None:
        """Wait until the broker answered the attach with a source (fails on refusal)."""
        wait_for(lambda: self.attached.is_set() or self.error is not None, timeout, "attach")
        if self.error:
            raise AssertionError(f"attach refused: {self.error}")

    def wait_refused(self, timeout: float = 30.0) -> tuple[str, str]:
        """Wait for the refusal of the attach; return (condition, description)."""
        wait_for(lambda: self.error is not None, timeout, "refusal")
        assert self.error is not None
        return self.error

    def wait_count(self, n: int, timeout: float = 60.0) -> list[Received]:
        """Wait until at least ``n`` messages arrived."""
        def arrived() -> bool:
            assert not self.undecodable, f"the broker sent deliveries that are not messages: {self.undecodable[:3]}"
            return len(self.received) >= n

        wait_for(arrived, timeout, f"{n} messages (have {len(self.received)})")
        return self.received

    def detach(self, *, closed: bool = False, timeout: float = 30.0) -> tuple[str | None, str | None]:
        """Detach the link (closed=false, like closing a durable JMS consumer) or close it
        (closed=true, unsubscribe); wait for the broker's answer and return its (condition, description)."""
        self._injector.trigger(ApplicationEvent("sharedsub_detach", subject=closed))
        wait_for(lambda: self.remote_closed is not None, timeout, "the broker's detach")
        assert self.remote_closed is not None
        return self.remote_closed

    def end_session(self) -> None:
        """End the link's session without detaching the link (as Qpid JMS closes a session)."""
        self._injector.trigger(ApplicationEvent("sharedsub_end_session"))

    def drop_connection(self) -> None:
        """Drop the connection without a close frame (a client that died)."""
        self._injector.trigger(ApplicationEvent("sharedsub_drop"))

    def flow(self, credit: int) -> None:
        """Grant more credit (from any thread)."""
        self._injector.trigger(ApplicationEvent("sharedsub_flow", subject=credit))

    def stop(self) -> None:
        """Close the connection and end the thread."""
        if self.is_alive():
            self._injector.trigger(ApplicationEvent("sharedsub_close"))
            self.join(15)


def _settle(dlv: proton.Delivery, how: str) -> None:
    """Settle a received delivery: ``accept``, ``release``, ``reject[|condition[|description]]``,
    ``modified-failed``, ``modified-undeliverable``, ``modified-failed-undeliverable``; ``none``
    leaves it unsettled; ``presettled`` does nothing (the sender settled it already)."""
    if how in ("none", "presettled"):
        return
    if how == "accept":
        dlv.update(Delivery.ACCEPTED)
    elif how == "release":
        dlv.update(Delivery.RELEASED)
    elif how.startswith("reject"):
        _, _, rest = how.partition("|")
        if rest:
            name, _, description = rest.partition("|")
            dlv.local.condition = proton.Condition(name, description or None)
        dlv.update(Delivery.REJECTED)
    elif how.startswith("modified-"):
        flags = how[len("modified-") :].split("-")
        dlv.local.failed = "failed" in flags
        dlv.local.undeliverable = "undeliverable" in flags
        dlv.update(Delivery.MODIFIED)
    else:
        raise ValueError(f"unknown settlement {how!r}")
    dlv.settle()


def presettled(link: proton.Link) -> None:
    """``configure`` for an at-most-once consumer: asks for snd-settle-mode settled."""
    link.snd_settle_mode = proton.Link.SND_SETTLED


_EXPIRY = {
    "link-detach": proton.Terminus.EXPIRE_WITH_LINK,
    "session-end": proton.Terminus.EXPIRE_WITH_SESSION,
    "connection-close": proton.Terminus.EXPIRE_WITH_CONNECTION,
    "never": proton.Terminus.EXPIRE_NEVER,
}


def _source_setup(
    capabilities: list[str] | None,
    durable: int | None,
    expiry: str | None,
    selector: str | None,
    no_local: bool,
    extra: Callable[[proton.Link], None] | None,
) -> Callable[[proton.Link], None]:
    """Set the source terminus as the Qpid JMS client does (docs/wire.md §1.3, §1.5)."""

    def apply(link: proton.Link) -> None:
        src = link.source
        if capabilities:
            src.capabilities.put_array(False, proton.Data.SYMBOL)
            src.capabilities.enter()
            for c in capabilities:
                src.capabilities.put_symbol(c)
            src.capabilities.exit()
        if durable is not None:
            src.durability = durable
        if expiry is not None:
            src.expiry_policy = _EXPIRY[expiry]
        filters: dict[Any, Any] = {}
        if selector is not None:
            filters[proton.symbol("jms-selector")] = proton.Described(proton.ulong(0x468C00000004), selector)
        if no_local:
            filters[proton.symbol("no-local")] = proton.Described(proton.ulong(0x468C00000003), "NoLocalFilter{}")
        if filters:
            src.filter.put_object(filters)
        if extra is not None:
            extra(link)

    return apply


def jms_shared_durable(name: str, *, is_global: bool = False, ordinal: int = 1) -> dict[str, Any]:
    """Subscriber kwargs of a Qpid JMS shared durable consumer (docs/wire.md §1.3/§1.4)."""
    if is_global:
        link = f"{name}|global" if ordinal == 1 else f"{name}|global{ordinal}"
    else:
        link = name if ordinal == 1 else f"{name}|{ordinal}"
    caps = ["topic", "shared", "global"] if is_global else ["topic", "shared"]
    return {"name": link, "capabilities": caps, "durable": 2, "expiry": "never"}


def jms_shared_volatile(name: str, *, is_global: bool = False, ordinal: int = 1) -> dict[str, Any]:
    """Subscriber kwargs of a Qpid JMS shared non-durable consumer."""
    link = f"{name}|global-volatile{ordinal}" if is_global else f"{name}|volatile{ordinal}"
    caps = ["topic", "shared", "global"] if is_global else ["topic", "shared"]
    return {"name": link, "capabilities": caps, "durable": 0, "expiry": "link-detach"}


def jms_durable(name: str) -> dict[str, Any]:
    """Subscriber kwargs of a Qpid JMS unshared durable subscriber (needs a ClientID)."""
    return {"name": name, "capabilities": ["topic"], "durable": 2, "expiry": "never"}


def unsubscribe(url: str, name: str, *, container_id: str, is_global: bool = False) -> tuple[str | None, str | None]:
    """Session.unsubscribe as Qpid JMS does it (docs/wire.md §1.9): null-source attach, then close.

    Returns the condition of the broker's refusal or final detach: (None, None) on success.
    """
    link = f"{name}|global" if is_global else name
    with Subscriber(url, None, name=link, container_id=container_id) as sub:
        wait_for(lambda: sub.attached.is_set() or sub.error is not None, 30, "lookup answer")
        if sub.error is not None:
            return sub.error
        return sub.detach(closed=True)


class _Configure(proton.reactor.LinkOption):
    def __init__(self, fn: Callable[[proton.Link], None] | None) -> None:
        self.fn = fn

    def apply(self, link: proton.Link) -> None:
        if self.fn is not None:
            self.fn(link)
