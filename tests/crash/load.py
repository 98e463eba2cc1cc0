"""Load for a crash run: a paced publisher and consumers that outlive the service going away.

Every client is a thread running one python-qpid-proton ``Container`` per connection attempt
(proton objects never leave that thread); when the connection drops (the front end was killed)
the container stops and the thread connects again after a short pause, to the same URL (the
driver restarts the service on the same port). Everything they see goes to a :class:`Recorder`:

* the publisher gives each message a unique id ``<run>-<publisher>-<sequence>`` (the sequence also
  in the body) and records it as sent, then its outcome once the broker settles it. It never
  resends: a message whose outcome was lost with the connection stays *in doubt*.
* a consumer accepts every transfer (at once, or after holding it ``settle_delay`` seconds, so a
  kill finds deliveries unsettled) and records the delivery (message id, delivery-count,
  first-acquirer) and the accept, each with the incarnation its connection reached.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import proton
from proton import Delivery as ProtonDelivery
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption

from tests.crash.invariants import Accept, ClientLog, Delivery, Publish, Replay, Subscription

_STATES = {
    ProtonDelivery.ACCEPTED: "accepted",
    ProtonDelivery.REJECTED: "rejected",
    ProtonDelivery.RELEASED: "released",
    ProtonDelivery.MODIFIED: "modified",
}
RECONNECT_PAUSE = 0.3  # seconds between connection attempts
TICK = 0.02  # seconds between a client's checks of its stop flag (and the publisher's pacing)


class Recorder:
    """What every client saw, shared by their threads (all methods are thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._publishes: dict[str, Publish] = {}
        self._deliveries: list[Delivery] = []
        self._accepts: list[Accept] = []
        self._subscriptions: dict[str, Subscription] = {}
        self._incarnations: list[float] = []
        self._replays: list[Replay] = []

    @property
    def incarnation(self) -> int:
        """Number of the front-end incarnation now current (-1 before the first)."""
        return len(self._incarnations) - 1

    def new_incarnation(self) -> int:
        """Call after the previous incarnation is dead and before the next one is started."""
        with self._lock:
            self._incarnations.append(time.time())
            return len(self._incarnations) - 1

    def sent(self, msg_id: str, topic: str, properties: Mapping[str, int | float | str | bool] | None = None) -> None:
        with self._lock:
            self._publishes[msg_id] = Publish(msg_id, topic, time.monotonic(), None, properties)

    def settled(self, msg_id: str, outcome: str) -> None:
        with self._lock:
            p = self._publishes[msg_id]
            self._publishes[msg_id] = dataclasses.replace(p, outcome=outcome)

    def attached(self, subscription: str, topic: str, selector: str | None = None) -> None:
        """A consumer's attach was answered; the first one creates the subscription."""
        with self._lock:
            self._subscriptions.setdefault(subscription, Subscription(subscription, topic, time.monotonic(), selector))

    def delivered(self, d: Delivery) -> None:
        with self._lock:
            self._deliveries.append(d)

    def accepted(self, a: Accept) -> None:
        with self._lock:
            self._accepts.append(a)

    def replayed(self, r: Replay) -> None:
        """A replay the driver asked for ended (answered, or cut short by a kill)."""
        with self._lock:
            self._replays.append(r)

    def counts(self) -> dict[str, int]:
        """Publishes by outcome ("in-doubt" for none) and deliveries per subscription, for progress checks."""
        with self._lock:
            out: dict[str, int] = {}
            for p in self._publishes.values():
                key = p.outcome or "in-doubt"
                out[key] = out.get(key, 0) + 1
            for d in self._deliveries:
                out[f"delivered:{d.subscription}"] = out.get(f"delivered:{d.subscription}", 0) + 1
            return out

    def snapshot(self) -> ClientLog:
        """A copy of everything recorded so far."""
        with self._lock:
            return ClientLog(
                publishes=list(self._publishes.values()),
                deliveries=list(self._deliveries),
                accepts=list(self._accepts),
                subscriptions=list(self._subscriptions.values()),
                incarnations=list(self._incarnations),
                replays=list(self._replays),
            )


class _Client(threading.Thread):
    """Connect, run until the connection drops or :meth:`stop`, connect again."""

    def __init__(self, url: str, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.url = url
        self.connections = 0
        self.errors: list[str] = []  # link refusals and transport errors, for failure reports
        self._stopping = threading.Event()
        self._stopped = threading.Event()

    def handler(self) -> MessagingHandler:
        raise NotImplementedError

    def container_id(self) -> str | None:
        return None

    def run(self) -> None:
        while not self._stopping.is_set():
            container = Container(self.handler())
            if cid := self.container_id():
                container.container_id = cid
            try:
                container.run()
            except Exception as exc:  # a proton error ends this connection, not the client
                self.errors.append(f"container: {exc!r}")
            if self._done():
                break
            self._stopping.wait(RECONNECT_PAUSE)
        self._stopped.set()

    def _done(self) -> bool:
        return self._stopping.is_set()

    def stop(self, timeout: float = 30.0) -> None:
        """Close the connection and end the thread."""
        self._stopping.set()
        self.join(timeout)


class _Source(LinkOption):
    """Source terminus of a Qpid JMS durable consumer: capabilities, durability 2, expiry never."""

    def __init__(self, capabilities: list[str]) -> None:
        self.capabilities = capabilities

    def apply(self, link: proton.Link) -> None:
        src = link.source
        src.capabilities.put_array(False, proton.Data.SYMBOL)
        src.capabilities.enter()
        for c in self.capabilities:
            src.capabilities.put_symbol(c)
        src.capabilities.exit()
        src.durability = proton.Terminus.DELIVERIES
        src.expiry_policy = proton.Terminus.EXPIRE_NEVER


class Consumer(_Client):
    """A durable subscription consumer that accepts everything (after ``settle_delay``) and
    reconnects forever.

    ``subscription`` names the subscription in the records (both consumers of a shared one use
    the same); ``link`` and ``container`` are what the attach sends, so a reconnect names the same
    subscription. ``incarnation`` returns the front-end incarnation now current.
    """

    def __init__(
        self,
        url: str,
        recorder: Recorder,
        *,
        subscription: str,
        topic: str,
        link: str,
        container: str,
        capabilities: list[str],
        incarnation: Callable[[], int],
        credit: int = 50,
        settle_delay: float = 0.0,
    ) -> None:
        super().__init__(url, f"consumer-{link}-{container}")
        self.recorder = recorder
        self.subscription, self.topic, self.link, self.container = subscription, topic, link, container
        self.capabilities = capabilities
        self.incarnation = incarnation
        self.credit = credit
        self.settle_delay = settle_delay  # hold each delivery this long before accepting it
        self.attaches = 0

    def container_id(self) -> str | None:
        return self.container

    def handler(self) -> MessagingHandler:
        client = self

        class _H(MessagingHandler):
            def __init__(self) -> None:
                super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
                self.incarnation = -1
                self.conn: Any = None
                self.held: collections.deque[tuple[float, Any, str]] = collections.deque()  # (received, delivery, id)

            def on_start(self, event: Any) -> None:
                # Taken before connecting: this connection can reach only this incarnation.
                self.incarnation = client.incarnation()
                self.conn = event.container.connect(client.url, reconnect=False)
                rcv = event.container.create_receiver(
                    self.conn, client.topic, name=client.link, options=_Source(client.capabilities)
                )
                rcv.flow(client.credit)
                event.container.schedule(TICK, self)

            def on_timer_task(self, event: Any) -> None:
                if client._stopping.is_set():
                    event.container.stop()
                    return
                self._settle(time.monotonic() - client.settle_delay)
                event.container.schedule(TICK, self)

            def _settle(self, received_before: float) -> None:
                while self.held and self.held[0][0] <= received_before:
                    _, dlv, msg_id = self.held.popleft()
                    self.accept(dlv)
                    client.recorder.accepted(Accept(client.subscription, client.name, msg_id, self.incarnation, time.monotonic()))
                    dlv.link.flow(1)

            def on_connection_opened(self, event: Any) -> None:
                client.connections += 1

            def on_link_opened(self, event: Any) -> None:
                if event.link.remote_source.address is not None:
                    client.attaches += 1
                    client.recorder.attached(client.subscription, client.topic)

            def on_message(self, event: Any) -> None:
                msg: Message = event.message
                now = time.monotonic()
                client.recorder.delivered(
                    Delivery(
                        client.subscription, client.name, str(msg.id), self.incarnation, now, int(msg.delivery_count),
                        msg.first_acquirer,
                    )
                )
                self.held.append((now, event.delivery, str(msg.id)))
                if not client.settle_delay:
                    self._settle(now)

            def on_link_error(self, event: Any) -> None:
                cond = event.link.remote_condition
                client.errors.append(f"link: {cond.name if cond else None}: {cond.description if cond else ''}")
                event.container.stop()

            def on_transport_error(self, event: Any) -> None:
                client.errors.append(f"transport: {event.transport.condition}")

            def on_disconnected(self, event: Any) -> None:
                event.container.stop()

        return _H()


class Publisher(_Client):
    """Publishes unique, numbered messages to ``topic`` at about ``rate`` per second, in bursts of
    ``burst`` (so group commits hold several messages, as under real load, rather than one commit
    per message), at most ``window`` unsettled, until :meth:`finish`; reconnects when the
    connection drops. ``properties(n)``, when given, is the application properties of the
    message with sequence number ``n`` (recorded with it)."""

    def __init__(
        self,
        url: str,
        recorder: Recorder,
        *,
        topic: str,
        name: str,
        rate: float,
        burst: int = 10,
        window: int = 50,
        properties: Callable[[int], dict[str, int | float | str | bool]] | None = None,
    ) -> None:
        super().__init__(url, f"publisher-{name}")
        self.recorder = recorder
        self.topic, self.publisher = topic, name
        self.rate, self.burst, self.window = rate, burst, window
        self.properties = properties
        self.run_id = uuid.uuid4().hex[:6]
        self.next_seq = 0
        self._finishing = threading.Event()

    def finish(self, timeout: float = 60.0) -> None:
        """Stop sending, wait for the outcomes of what was sent, close."""
        self._finishing.set()
        self.join(timeout)
        if self.is_alive():
            self.stop()

    def _done(self) -> bool:
        return self._stopping.is_set() or self._finishing.is_set()

    def handler(self) -> MessagingHandler:
        client = self

        class _H(MessagingHandler):
            def __init__(self) -> None:
                super().__init__(auto_settle=True)
                self.sender: Any = None
                self.unsettled: dict[str, str] = {}  # by delivery tag
                self.allowance = 0.0
                self.last = time.monotonic()

            def on_start(self, event: Any) -> None:
                conn = event.container.connect(client.url, reconnect=False)
                self.sender = event.container.create_sender(conn, client.topic)
                event.container.schedule(TICK, self)

            def on_connection_opened(self, event: Any) -> None:
                client.connections += 1

            def on_timer_task(self, event: Any) -> None:
                if client._stopping.is_set() or (client._finishing.is_set() and not self.unsettled):
                    event.container.stop()
                    return
                now = time.monotonic()
                if now - self.last >= client.burst / client.rate:
                    self.allowance = min(float(client.window), self.allowance + client.burst)
                    self.last = now
                self._send()
                event.container.schedule(TICK, self)

            def on_sendable(self, event: Any) -> None:
                self._send()

            def _send(self) -> None:
                snd = self.sender
                while (
                    not client._finishing.is_set()
                    and self.allowance >= 1
                    and snd.credit > 0
                    and len(self.unsettled) < client.window
                ):
                    seq = client.next_seq
                    client.next_seq += 1
                    msg_id = f"{client.run_id}-{client.publisher}-{seq:07d}"
                    props = client.properties(seq) if client.properties is not None else None
                    client.recorder.sent(msg_id, client.topic, props)
                    dlv = snd.send(Message(id=msg_id, body=f"{client.publisher}:{seq}", durable=True, properties=props))
                    self.unsettled[str(dlv.tag)] = msg_id
                    self.allowance -= 1

            def on_settled(self, event: Any) -> None:
                msg_id = self.unsettled.pop(str(event.delivery.tag), None)
                if msg_id is not None:
                    state = _STATES.get(event.delivery.remote_state, str(event.delivery.remote_state))
                    client.recorder.settled(msg_id, state)

            def on_link_error(self, event: Any) -> None:
                cond = event.link.remote_condition
                client.errors.append(f"link: {cond.name if cond else None}: {cond.description if cond else ''}")
                event.container.stop()

            def on_transport_error(self, event: Any) -> None:
                client.errors.append(f"transport: {event.transport.condition}")

            def on_disconnected(self, event: Any) -> None:
                event.container.stop()

        return _H()
