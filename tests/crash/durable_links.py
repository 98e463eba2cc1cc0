"""Many unshared durable subscriptions on one connection: a receiver link each, one thread.

:class:`DurableLinks` is the crash load's consumer (tests/crash/load.py) for runs with hundreds of
subscriptions: a thread per subscription would cost more than the service under test, so one
client id (the connection's container id) holds a link per subscription, each named for its
subscription (an unshared durable subscription is the client id and the link name, as a Qpid JMS
client names it), each with its JMS selector as the source's selector filter. It reconnects, and
re-attaches every link, when the connection drops, as the other clients there do, and records
to the same :class:`~tests.crash.load.Recorder`: the attach (with the selector, which the
invariants evaluate), every delivery and its accept (at once: a kill finds the acks of the last
moments not yet committed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Selector

from tests.crash.invariants import Accept, Delivery
from tests.crash.load import TICK, Recorder, _Client, _Source


class DurableLinks(_Client):
    """One connection as client id ``client_id``, a link per ``(subscription, selector)`` of
    ``subscriptions`` (the subscription's name is the link's name and its name in the records)."""

    def __init__(
        self,
        url: str,
        recorder: Recorder,
        *,
        client_id: str,
        topic: str,
        subscriptions: Sequence[tuple[str, str | None]],
        incarnation: Callable[[], int],
        credit: int = 20,
    ) -> None:
        super().__init__(url, f"links-{client_id}")
        self.recorder = recorder
        self.client_id, self.topic = client_id, topic
        self.selectors = dict(subscriptions)
        self.incarnation = incarnation
        self.credit = credit
        self.attached: set[str] = set()  # subscriptions whose attach was answered at least once

    def container_id(self) -> str | None:
        return self.client_id

    def handler(self) -> MessagingHandler:
        client = self

        class _H(MessagingHandler):
            def __init__(self) -> None:
                super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
                self.incarnation = -1

            def on_start(self, event: Any) -> None:
                # Taken before connecting: this connection can reach only this incarnation.
                self.incarnation = client.incarnation()
                conn = event.container.connect(client.url, reconnect=False)
                for name, selector in client.selectors.items():
                    options: list[Any] = [_Source(["topic"])]
                    if selector is not None:
                        options.append(Selector(selector))
                    event.container.create_receiver(conn, client.topic, name=name, options=options).flow(client.credit)
                event.container.schedule(TICK, self)

            def on_timer_task(self, event: Any) -> None:
                if client._stopping.is_set():
                    event.container.stop()
                    return
                event.container.schedule(TICK, self)

            def on_connection_opened(self, event: Any) -> None:
                client.connections += 1

            def on_link_opened(self, event: Any) -> None:
                name = event.link.name
                if event.link.remote_source.address is not None and name in client.selectors:
                    client.attached.add(name)
                    client.recorder.attached(name, client.topic, client.selectors[name])

            def on_message(self, event: Any) -> None:
                msg: Message = event.message
                name, msg_id, now = event.link.name, str(msg.id), time.monotonic()
                count, first = int(msg.delivery_count), msg.first_acquirer
                client.recorder.delivered(Delivery(name, client.name, msg_id, self.incarnation, now, count, first))
                self.accept(event.delivery)
                client.recorder.accepted(Accept(name, client.name, msg_id, self.incarnation, time.monotonic()))
                event.link.flow(1)

            def on_link_error(self, event: Any) -> None:
                cond = event.link.remote_condition
                client.errors.append(f"link {event.link.name}: {cond.name if cond else None}: {cond.description if cond else ''}")
                event.container.stop()

            def on_transport_error(self, event: Any) -> None:
                client.errors.append(f"transport: {event.transport.condition}")

            def on_disconnected(self, event: Any) -> None:
                event.container.stop()

        return _H()
