"""The front end's side of sharing subscriptions between members: what the partition owners'
thread (sharedsub.runtime.cluster.partition_owners) asks of this front end and tells it, done on
the reactor thread (``FrontEndServer.call``).

* :meth:`ReactorSubscriptions.consumed`: the generations with consumer links here;
* :meth:`ReactorSubscriptions.own`: dispatch exactly these partitions of a generation: the
  tailer posts only their rows (partitions gained are read again from the backlog, a dead
  dispatcher's marked possibly delivered), and the dispatch rules forget the waiting rows of
  partitions given up (sharedsub.core.delivery.dispatch row 22);
* :meth:`ReactorSubscriptions.draining`: how many rows of given partitions are sent and not
  settled here; :meth:`ReactorSubscriptions.settlements_stored`: when what was settled is in
  the ack logs (a committer barrier);
* :meth:`ReactorSubscriptions.catalog`: catalog records other members committed
  (``Subscriptions.merge``); :meth:`ReactorSubscriptions.end_unconsumed`: end a non-durable
  subscription no live member consumes (``Subscriptions.end_unconsumed``).
"""

from __future__ import annotations

import concurrent.futures
import threading

from connectors.amqp.handler import FrontEnd
from connectors.amqp.server import FrontEndServer
from sharedsub.core.model import SubscriptionRecord
from sharedsub.runtime.cluster.partition_owners import Generation


class ReactorSubscriptions:
    """:class:`sharedsub.runtime.cluster.partition_owners.LocalSubscriptions` of one front end."""

    def __init__(self, server: FrontEndServer) -> None:
        self._server = server
        self._owned: dict[str, frozenset[int]] = {}  # by key; the reactor thread's

    def consumed(self) -> list[Generation]:  # noqa: D102 (the Protocol documents each member)
        def read(front_end: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
            records = front_end.subscriptions.records
            found = [
                Generation(key, rec.generation, rec.topic)
                for key, rec in records.items()
                if front_end.dispatcher.consumers(key) > 0
            ]
            future.set_result({"generations": found})

        found = self._server.call(read)["generations"]
        assert isinstance(found, list)
        return found

    def own(self, gen: Generation, partitions: frozenset[int], taken_over: frozenset[int]) -> None:  # noqa: D102
        def apply(front_end: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
            rec = front_end.subscriptions.records.get(gen.key)
            if rec is None or rec.generation != gen.generation:
                future.set_result({})
                return
            lost = self._owned.get(gen.key, frozenset()) - partitions
            if lost:
                front_end.dispatcher.release(gen.key, lost)
            if front_end.tailer.set_partitions(gen.key, partitions, taken_over=taken_over):
                self._owned[gen.key] = partitions
            else:
                self._owned.pop(gen.key, None)  # not tailed here (no consumer): read afresh at the next attach
            future.set_result({})

        self._server.call(apply)

    def catalog(self, records: list[SubscriptionRecord]) -> None:  # noqa: D102
        def merge(front_end: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
            front_end.subscriptions.merge(records)
            future.set_result({})

        self._server.call(merge)

    def settlements_stored(self) -> threading.Event:  # noqa: D102
        stored = threading.Event()

        def barrier(front_end: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
            front_end.subscriptions.after_acks_stored(stored.set)
            future.set_result({})

        self._server.call(barrier)
        return stored

    def end_unconsumed(self, gen: Generation) -> None:  # noqa: D102
        def end(front_end: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
            front_end.subscriptions.end_unconsumed(gen.key, gen.generation)
            future.set_result({})

        self._server.call(end)

    def draining(self, gen: Generation, partitions: frozenset[int]) -> int:  # noqa: D102
        def count(front_end: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
            future.set_result({"rows": front_end.dispatcher.draining(gen.key, partitions)})

        rows = self._server.call(count)["rows"]
        assert isinstance(rows, int)
        return rows
