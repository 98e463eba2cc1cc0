"""The front end's port to the cluster (connectors/amqp/cluster_port.py): what waits for a
member's answer stays on the reactor thread, the membership's threads get only ints, the answer
runs on the reactor thread; and the membership's calls into the front end come back typed.

The engine loop runs on a thread of its own here, as it does in a service; the membership is a
stand-in that answers from a thread of its own (what MemberClaims and PeerConsumers do).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import proton
import pytest

from connectors.amqp.cluster_port import ClusterPort
from connectors.amqp.wire.engine_loop import EngineLoop
from connectors.amqp.wire.reactor_thread import holds_proton
from sharedsub.runtime.cluster.member_claims import Held
from sharedsub.runtime.cluster.partition_owners import Generation
from sharedsub.runtime.cluster.peer_consumers import Seen


class _Membership:
    """Answers every request from another thread, through ``post``, like the real one."""

    several = True

    def __init__(self, post: Callable[[Callable[[], None]], None]) -> None:
        self.post = post
        self.handed: list[object] = []  # what the port handed to the membership's threads

    def _answer(self, then: Callable[[Any], None], value: object) -> None:
        self.handed.append(then)
        threading.Thread(target=lambda: self.post(lambda: then(value))).start()

    def claim_container(self, _name: str, then: Callable[[Held | None], None]) -> None:
        self._answer(then, Held(slot=1))

    def look(self, keys: list[str], then: Callable[[Seen | None], None]) -> None:
        self._answer(then, Seen({}, {k: 2 for k in keys}))


class _FrontEnd:
    """What the partition owners' calls read of a front end."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    @property
    def subscriptions(self) -> Any:  # Any: a stand-in
        self.threads.append(threading.current_thread().name)
        return type("S", (), {"records": {"k": type("R", (), {"generation": 3, "topic": "t"})()}})()

    @property
    def dispatcher(self) -> Any:  # Any: a stand-in
        return type("D", (), {"consumers": staticmethod(lambda _key: 1), "draining": staticmethod(lambda _k, p: len(p))})()


class _Handler(proton.Handler):
    pass


@pytest.fixture
def loop() -> Iterator[EngineLoop]:
    loop = EngineLoop(_Handler())
    thread = threading.Thread(target=loop.run, name="reactor", daemon=True)
    thread.start()
    yield loop
    loop.injector.call(loop.stop)
    thread.join(5)


def _port(loop: EngineLoop) -> tuple[ClusterPort, _Membership, _FrontEnd]:
    port = ClusterPort(loop.injector, lambda _local, post: _Membership(post))  # type: ignore[arg-type,return-value]
    front_end = _FrontEnd()
    port.connect(front_end)  # type: ignore[arg-type]
    return port, port.membership, front_end  # type: ignore[return-value]


def test_a_claim_answer_runs_on_the_reactor_and_only_an_int_left_it(loop: EngineLoop) -> None:
    port, membership, _ = _port(loop)
    conn = proton.Connection()
    got: list[tuple[str, object, Held | None]] = []
    done = threading.Event()

    def then(held: Held | None) -> None:  # holds the connection: must never leave the reactor
        got.append((threading.current_thread().name, conn, held))
        done.set()

    assert holds_proton(then)
    loop.injector.call(lambda: port.claim_container("c1", then))
    assert done.wait(5)
    assert got == [("reactor", conn, Held(slot=1))]
    assert membership.handed and not any(holds_proton(w) for w in membership.handed)


def test_a_look_answer_comes_back_typed_on_the_reactor(loop: EngineLoop) -> None:
    port, membership, _ = _port(loop)
    link_like = proton.Connection()
    got: list[tuple[str, Seen | None]] = []
    done = threading.Event()

    def then(seen: Seen | None) -> None:
        assert link_like is not None
        got.append((threading.current_thread().name, seen))
        done.set()

    loop.injector.call(lambda: port.look(["a", "b"], then))
    assert done.wait(5)
    assert got == [("reactor", Seen({}, {"a": 2, "b": 2}))]
    assert not any(holds_proton(w) for w in membership.handed)


def test_the_partition_owners_calls_run_on_the_reactor_and_return_typed_values(loop: EngineLoop) -> None:
    port, _, front_end = _port(loop)
    assert port.consumed() == [Generation("k", 3, "t")]
    assert port.draining(Generation("k", 3, "t"), frozenset({0, 1})) == 2
    assert front_end.threads == ["reactor"]
