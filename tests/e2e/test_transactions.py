"""Local transactions on the wire (connectors/amqp/transactions.py) against a real ``sharedsub serve``.

The Qpid JMS tier (tests/jms) drives transacted sessions through the JMS API; these tests pin the
frames with python-qpid-proton's own controller: declare, transactional publish, discharge with
fail=false/true, a discharge naming another connection's transaction, a connection lost with a
transaction open, and the per-transaction limit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from proton import Delivery, Message
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container

from tests.amqp_peer import Subscriber, publish
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


class _Scenario(MessagingHandler, TransactionHandler):
    """One connection: declare, send ``bodies`` in the transaction, then ``finish(txn)``.

    Records the publish outcomes, whether the discharge succeeded and its error condition.
    """

    def __init__(self, url: str, topic: str, bodies: list[str], finish: Callable[[Any, Any], None]) -> None:
        super().__init__(auto_accept=False, auto_settle=True)
        self.url, self.topic, self.bodies, self.finish = url, topic, bodies, finish
        self.outcomes: list[int] = []
        self.discharged: str | None = None  # committed | aborted | commit-failed
        self.declared = threading.Event()
        self.done = threading.Event()
        self.conn: Any = None
        self.txn: Any = None

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.conn = event.container.connect(self.url, reconnect=False)
        self.sender = event.container.create_sender(self.conn, self.topic)
        event.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event: Any) -> None:
        self.txn = event.transaction
        self.declared.set()
        for body in self.bodies:
            self.txn.send(self.sender, Message(body=body))

    def on_settled(self, event: Any) -> None:
        if event.delivery.link == self.sender:
            state = event.delivery.remote_state
            inner = event.delivery.remote.data
            self.outcomes.append(int(inner[1].descriptor) if state == 0x34 and inner and len(inner) > 1 else int(state))
            if len(self.outcomes) == len(self.bodies):
                self.finish(self, self.txn)

    def on_transaction_committed(self, event: Any) -> None:
        self._end("committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._end("aborted")

    def on_transaction_commit_failed(self, event: Any) -> None:
        self._end("commit-failed")

    def _end(self, how: str) -> None:
        self.discharged = how
        self.done.set()
        self.conn.close()


def _run(scenario: _Scenario) -> threading.Thread:
    thread = threading.Thread(target=Container(scenario).run, daemon=True)
    thread.start()
    return thread


def _bodies(sub: Subscriber) -> list[str]:
    return [r.message.body for r in sub.received]


def test_committed_messages_are_delivered_rolled_back_ones_never(service: ServeProcess, topic: str) -> None:
    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
        committed = _Scenario(service.url, topic, ["c1", "c2", "c3"], lambda s, txn: txn.commit())
        aborted = _Scenario(service.url, topic, ["r1", "r2"], lambda s, txn: txn.abort())
        for sc in (committed, aborted):
            _run(sc)
            assert sc.done.wait(60), "no discharge outcome"
        # Each transactional publish is answered transactional-state(accepted) before discharge.
        assert committed.outcomes == [Delivery.ACCEPTED] * 3
        assert aborted.outcomes == [Delivery.ACCEPTED] * 2
        assert (committed.discharged, aborted.discharged) == ("committed", "aborted")
        # A control message published after both: once it is delivered, everything routed before it is too.
        assert [o.state for o in publish(service.url, topic, [Message(body="after")])] == ["accepted"]
        sub.wait_count(4)
        assert _bodies(sub) == ["c1", "c2", "c3", "after"]


def test_a_connection_lost_with_a_transaction_open_rolls_it_back(service: ServeProcess, topic: str) -> None:
    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
        scenario = _Scenario(service.url, topic, ["lost1", "lost2"], lambda s, txn: s.conn.close())
        thread = _run(scenario)
        thread.join(60)
        assert scenario.outcomes == [Delivery.ACCEPTED] * 2 and scenario.discharged is None
        assert [o.state for o in publish(service.url, topic, [Message(body="after")])] == ["accepted"]
        sub.wait_count(1)
        assert _bodies(sub) == ["after"]


def test_another_connections_transaction_cannot_be_discharged(service: ServeProcess, topic: str) -> None:
    """A discharge (and a transactional publish) naming a transaction declared on another
    connection is refused with amqp:transaction:unknown-id, and that transaction stays intact."""
    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
        release = threading.Event()
        owner = _Scenario(service.url, topic, ["mine"], lambda s, txn: s.container.schedule(0.1, _CommitWhen(release, txn)))
        _run(owner)
        assert owner.declared.wait(60)
        intruder = _Intruder(service.url, topic, owner.txn.id)
        _run(intruder)
        assert intruder.done.wait(60)
        assert intruder.publish_error == "amqp:transaction:unknown-id"
        assert intruder.discharge_error == "amqp:transaction:unknown-id"
        release.set()
        assert owner.done.wait(60) and owner.discharged == "committed"
        sub.wait_count(1)
        assert _bodies(sub) == ["mine"]


class _CommitWhen:
    """A timer task on the owner's container: commit once ``release`` is set."""

    def __init__(self, release: threading.Event, txn: Any) -> None:
        self.release, self.txn = release, txn

    def on_timer_task(self, event: Any) -> None:
        if self.release.is_set():
            self.txn.commit()
        else:
            event.container.schedule(0.1, self)


class _Intruder(MessagingHandler):
    """Sends a transfer and a discharge that carry another connection's transaction id."""

    def __init__(self, url: str, topic: str, txn_id: bytes) -> None:
        super().__init__(auto_settle=True)
        self.url, self.topic, self.txn_id = url, topic, txn_id
        self.publish_error: str | None = None
        self.discharge_error: str | None = None
        self.done = threading.Event()

    def on_start(self, event: Any) -> None:
        from proton import Described, Terminus, symbol

        self.conn = event.container.connect(self.url, reconnect=False)
        self.sender = event.container.create_sender(self.conn, self.topic)
        self.ctrl = event.container.create_sender(self.conn, None)
        self.ctrl.target.type = Terminus.COORDINATOR
        self._discharge = Message(body=Described(symbol("amqp:discharge:list"), [self.txn_id, False]))
        self._sent = False

    def on_sendable(self, event: Any) -> None:
        if self._sent or not (self.sender.credit and self.ctrl.credit):
            return
        self._sent = True
        dlv = self.sender.send(Message(body="intruder"))
        dlv.local.data = [self.txn_id]
        dlv.update(0x34)
        self.ctrl.send(self._discharge)

    def on_settled(self, event: Any) -> None:
        dlv = event.delivery
        error = str(dlv.remote.condition.name) if dlv.remote.condition else f"state {dlv.remote_state}"
        if dlv.link == self.sender:
            self.publish_error = error
        else:
            self.discharge_error = error
        if self.publish_error and self.discharge_error:
            self.done.set()
            self.conn.close()


def test_a_transaction_past_its_limit_can_only_roll_back(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("txn-limit")
    from sharedsub.storage.topics import create_topic

    create_topic(str(data), "limited")
    proc = ServeProcess(data, env={"SHAREDSUB_SERVER_MAX_TRANSACTION_MESSAGES": "2"}).start()
    try:
        with Subscriber(proc.url, "limited") as sub:
            sub.wait_attached()
            scenario = _Scenario(proc.url, "limited", ["a", "b", "c"], lambda s, txn: txn.commit())
            _run(scenario)
            assert scenario.done.wait(60)
            assert scenario.outcomes[:2] == [Delivery.ACCEPTED] * 2 and scenario.outcomes[2] == Delivery.REJECTED
            assert scenario.discharged == "commit-failed"
            assert [o.state for o in publish(proc.url, "limited", [Message(body="after")])] == ["accepted"]
            sub.wait_count(1)
            assert _bodies(sub) == ["after"]
    finally:
        assert proc.stop() == 0
