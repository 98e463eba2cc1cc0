"""The front end's one port to the cluster (docs/design.md §8): both directions between the
reactor thread and the membership's threads (sharedsub.runtime.cluster.membership), typed.

**Front end → cluster.** :meth:`ClusterPort.claim_container`, :meth:`look`,
:meth:`claim_subscription` take a continuation that runs on the reactor thread with the answer.
The continuation may hold proton objects (the link or connection waiting for the answer): it
never leaves the reactor thread. It is kept here under an int token (connectors/amqp/tokens.py);
the membership's threads get only the token, bound to :class:`ClusterPort`, and post the answer
back through the engine loop's injector (connectors/amqp/wire/reactor_thread.py states the rule
and checks it).

**Cluster → front end.** :class:`ClusterPort` is the
:class:`~sharedsub.runtime.cluster.partition_owners.LocalSubscriptions` of this front end: the
partition owners' thread asks and tells the front end through it, each call run on the reactor
thread with a typed future it waits for:

* :meth:`consumed`: the generations with consumer links here;
* :meth:`own`: dispatch exactly these partitions of a generation: the tailer posts only their
  rows (partitions gained are read again from the backlog, a dead dispatcher's marked possibly
  delivered), and the dispatch rules forget the waiting rows of partitions given up
  (sharedsub.core.delivery.dispatch row 22);
* :meth:`draining`: how many rows of given partitions are sent and not settled here;
  :meth:`settlements_stored`: when what was settled is in the ack logs (a committer barrier);
* :meth:`catalog`: catalog records other members committed (``Subscriptions.merge``);
  :meth:`end_unconsumed`: end a non-durable subscription no live member consumes
  (``Subscriptions.end_unconsumed``).

The front end connects itself with :meth:`ClusterPort.connect` when it is built (as it does to
the parts' ``Inbox``); the membership is built with the port (``build_parts``).
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from connectors.amqp.tokens import Tokens
from connectors.amqp.wire import reactor_thread
from connectors.amqp.wire.engine_loop import Injector
from sharedsub.core.errors import ServiceUnavailable
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.cluster.member_claims import Held
from sharedsub.runtime.cluster.membership import Membership, MemberStatus, Post
from sharedsub.runtime.cluster.partition_owners import Generation, LocalSubscriptions
from sharedsub.runtime.cluster.peer_consumers import Seen
from sharedsub.runtime.commit_requests import Token

if TYPE_CHECKING:  # the front end connects itself; importing it here would make a cycle
    from connectors.amqp.handler import FrontEnd

_T = TypeVar("_T")

CALL_TIMEOUT = 30.0
"""Seconds a cluster thread waits for the reactor thread to answer (it stops or is stuck)."""

_WAIT_STEP = 0.5  # seconds between two looks at whether the loop still takes calls

Claimed = Callable[[Held | None], None]
"""What runs on the reactor thread with a claim's answer (None: this member holds the name)."""

Looked = Callable[[Seen | None], None]
"""What runs on the reactor thread with the store's word on some subscriptions (None: no answer)."""


class ClusterPort:
    """See the module docstring. The membership it wraps is built by ``membership(local=self,
    post=...)`` at construction; with one member it is ``Membership.alone``."""

    def __init__(self, injector: Injector, membership: Callable[[LocalSubscriptions, Post], Membership]) -> None:
        self._injector = injector
        self._front_end: FrontEnd | None = None  # the reactor thread's, once connected
        self._owned: dict[str, frozenset[int]] = {}  # by key; the reactor thread's
        self._claims: Tokens[Claimed] = Tokens()  # the reactor thread's
        self._looks: Tokens[Looked] = Tokens()  # the reactor thread's
        self.membership = membership(self, injector.call)

    def connect(self, front_end: FrontEnd) -> None:
        """The front end the cluster's calls act on (before any thread starts)."""
        self._front_end = front_end

    # ------------------------------------------------------------------ front end -> cluster (reactor thread)

    @property
    def several(self) -> bool:
        """Several members share the data dir (names are claimed, decisions ask the store)."""
        return self.membership.several

    def failover_peers(self) -> Sequence[tuple[str, int]]:
        """The other members' (host, port) each open frame advertises."""
        return self.membership.failover_peers()

    def consumers_elsewhere(self, key: str, generation: int) -> int | None:
        """Consumers of the generation on the other live members (a store read: any thread but
        the reactor's); None with one member."""
        return self.membership.consumers_elsewhere(key, generation)

    def status(self) -> MemberStatus | None:
        """This member for /health (any thread); None with one member."""
        return self.membership.status()

    def claim_container(self, container: str, then: Claimed) -> None:
        """Claim ``container`` across the members; ``then(held)`` on the reactor thread."""
        token = self._claims.put(then)
        self.membership.claim_container(container, _handed_off(functools.partial(self._claimed, token), "the container claims"))

    def release_container(self, container: str) -> None:
        """Give ``container`` up."""
        self.membership.release_container(container)

    def look(self, keys: list[str], then: Looked) -> None:
        """The store's word on ``keys`` (their latest records, their consumers elsewhere);
        ``then(seen)`` on the reactor thread."""
        token = self._looks.put(then)
        self.membership.look(keys, _handed_off(functools.partial(self._looked, token), "the peer consumers"))

    def claim_subscription(self, key: str, then: Claimed) -> None:
        """Claim the unshared durable subscription ``key`` for one consumer here; ``then(held)``
        on the reactor thread."""
        token = self._claims.put(then)
        self.membership.claim_subscription(key, _handed_off(functools.partial(self._claimed, token), "the subscription claims"))

    def release_subscription(self, key: str) -> None:
        """Give the claim of ``key`` up."""
        self.membership.release_subscription(key)

    def _claimed(self, token: Token, held: Held | None) -> None:
        then = self._claims.pop(token)
        if then is not None:
            then(held)

    def _looked(self, token: Token, seen: Seen | None) -> None:
        then = self._looks.pop(token)
        if then is not None:
            then(seen)

    # ------------------------------------------------------------------ cluster -> front end (LocalSubscriptions)

    def _on_reactor(self, fn: Callable[[FrontEnd], _T]) -> _T:
        """``fn(front_end)`` run on the reactor thread, its result (any other thread).

        Raises:
            ServiceUnavailable: no answer within CALL_TIMEOUT (the front end is stopping).
            Whatever ``fn`` raised.
        """
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                assert self._front_end is not None, "ClusterPort.connect was not called"
                future.set_result(fn(self._front_end))
            except BaseException as exc:  # noqa: BLE001 (handed to the waiting thread, which logs it)
                future.set_exception(exc)

        injector = self._injector
        if injector.closed:
            raise ServiceUnavailable("the front end is stopping")
        injector.call(run)
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            try:
                return future.result(_WAIT_STEP)
            except concurrent.futures.TimeoutError:
                # A call queued after the loop stopped taking them would never run: stop waiting.
                if injector.closed or time.monotonic() >= deadline:
                    future.cancel()
                    raise ServiceUnavailable("the front end is stopping or did not answer") from None

    def consumed(self) -> list[Generation]:  # noqa: D102 (the Protocol documents each member)
        def read(front_end: FrontEnd) -> list[Generation]:
            return [
                Generation(key, rec.generation, rec.topic)
                for key, rec in front_end.subscriptions.records.items()
                if front_end.dispatcher.consumers(key) > 0
            ]

        return self._on_reactor(read)

    def own(self, gen: Generation, partitions: frozenset[int], taken_over: frozenset[int]) -> None:  # noqa: D102
        def apply(front_end: FrontEnd) -> None:
            rec = front_end.subscriptions.records.get(gen.key)
            if rec is None or rec.generation != gen.generation:
                return
            lost = self._owned.get(gen.key, frozenset()) - partitions
            if lost:
                front_end.dispatcher.release(gen.key, lost)
            if front_end.tailer.set_partitions(gen.key, partitions, taken_over=taken_over):
                self._owned[gen.key] = partitions
            else:
                self._owned.pop(gen.key, None)  # not tailed here (no consumer): read afresh at the next attach

        self._on_reactor(apply)

    def catalog(self, records: list[SubscriptionRecord]) -> None:  # noqa: D102
        self._on_reactor(lambda front_end: front_end.subscriptions.merge(records))

    def settlements_stored(self) -> threading.Event:  # noqa: D102
        stored = threading.Event()
        self._on_reactor(lambda front_end: front_end.subscriptions.after_acks_stored(stored.set))
        return stored

    def end_unconsumed(self, gen: Generation) -> None:  # noqa: D102
        self._on_reactor(lambda front_end: front_end.subscriptions.end_unconsumed(gen.key, gen.generation))

    def draining(self, gen: Generation, partitions: frozenset[int]) -> int:  # noqa: D102
        return self._on_reactor(lambda front_end: front_end.dispatcher.draining(gen.key, partitions))


def _handed_off(work: _T, where: str) -> _T:
    """``work``, checked (with the proton thread check on) to carry no proton object to ``where``."""
    reactor_thread.handed_off(work, where)
    return work
