"""Group commit: the single writer of topic tables and of the subscription catalog.

One thread drains a queue of requests and turns everything that is waiting into as few Delta
commits as possible: one catalog commit, then one commit per topic. A caller learns the outcome
through ``on_done`` (called on the committer thread, with every result of the group); the AMQP
front end uses it to settle publishers only after their message's commit.

Ordering is the guarantee the fan-out relies on: a subscription registered in a group gets
``start_seq`` = the topic's next seq *before* that group's messages, and the catalog commit
happens before the topic commit, so any message with ``seq >= start_seq`` is committed after
the subscription is visible in the catalog.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from sharedsub.errors import TopicExists
from sharedsub.model import SubscriptionRecord
from sharedsub.payloads import PayloadCache
from sharedsub.storage import catalog, delta, layout, schemas

log = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class Publish:
    """Store one message in a topic. ``columns`` are the typed columns but seq and time."""

    topic: str
    columns: dict[str, Any]
    message: bytes
    token: Any


@dataclasses.dataclass(slots=True)
class SaveSubscription:
    """Write a catalog revision. ``assign_start`` sets start_seq to the topic's next seq."""

    record: SubscriptionRecord
    assign_start: bool
    token: Any


@dataclasses.dataclass(slots=True)
class CreateTopic:
    """Create a topic table if it does not exist."""

    topic: str
    token: Any


@dataclasses.dataclass(slots=True)
class DropTopic:
    """Remove a topic table (admin ``topics drop``), after everything queued before it.

    Handled last in its group, so catalog revisions submitted before it (the DELETED revisions of
    the topic's subscriptions) are committed first. Forgets the topic's appender, next seq and
    cached payloads, so a topic created again under the name starts afresh.
    """

    topic: str
    token: Any = None


@dataclasses.dataclass(slots=True)
class Ack:
    """Record settled-for-good rows of a subscription generation in its acknowledgement log."""

    table: str  # ack table, relative to the data dir
    seqs: list[int]
    outcome: str
    consumer: str
    token: Any = None


@dataclasses.dataclass(slots=True)
class DeadLetterMessage:
    """Move a message to a subscription generation's dead-letter table.

    ``row`` is a schemas.DEAD_LETTER row without ``dead_lettered_at``. The dead-letter row is
    committed first and the ``dead-lettered`` row of the ack log (when ``ack_table`` is given)
    after it, in the same group: a crash between the two can leave the message dead-lettered
    twice after a restart, never lost.
    """

    table: str  # dead-letter table, relative to the data dir
    ack_table: str | None  # ack log, relative to the data dir (None: acks are not persisted)
    row: dict[str, Any]
    token: Any = None


@dataclasses.dataclass(slots=True)
class LinkEvent:
    """Record a consumer link attaching to or detaching from a subscription (catalog/links)."""

    row: dict[str, Any]  # schemas.LINKS without ``at``
    token: Any = None


@dataclasses.dataclass(slots=True)
class CommitTransaction:
    """Store every message a transaction published, never split: all of a topic's messages of
    the transaction land in one Delta commit (with whatever else the group holds for that
    topic). Its result fails when any of them failed; ``value`` is their seqs."""

    publishes: list[Publish]
    token: Any = None


@dataclasses.dataclass(slots=True)
class Barrier:
    """Nothing to store: its result comes once everything queued before it has been committed
    (results of a group are reported together, after all of the group's commits)."""

    token: Any = None


class _DeadLetterAck(Ack):
    """The ack-log row of a dead-lettered message (internal: its result is the dead letter's)."""

    __slots__ = ()


Request = (
    Publish | SaveSubscription | CreateTopic | Ack | DeadLetterMessage | LinkEvent | DropTopic | CommitTransaction | Barrier
)


@dataclasses.dataclass(slots=True)
class Result:
    """Outcome of one request: ``value`` is the seq, the saved record, or the topic path."""

    request: Request
    error: BaseException | None = None
    value: Any = None


class Committer:
    """The group-commit thread. Start with :meth:`start`, stop with :meth:`stop` (drains first)."""

    def __init__(
        self,
        root: str,
        *,
        cache: PayloadCache,
        on_done: Callable[[list[Result]], None],
        max_batch_messages: int = 5000,
        max_batch_bytes: int = 16 * 1024 * 1024,
        fsync: bool = False,
    ) -> None:
        """``fsync``: force every commit to disk before its results are reported (delta.sync_commit)."""
        self.root = root
        self._fsync = fsync
        self._cache = cache
        self._on_done = on_done
        self._max_msgs = max_batch_messages
        self._max_bytes = max_batch_bytes
        self._queue: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sharedsub-committer", daemon=True)
        self._appenders: dict[str, delta.TableAppender] = {}  # by table path
        self._next_seq: dict[str, int] = {}
        self._catalog = catalog.catalog_appender(root, fsync=fsync)
        self._revision = 0
        self.commits = 0
        # Newest published_at (epoch seconds) committed per topic; written by this thread only,
        # read by the metrics endpoint with dict.copy() (sharedsub.metrics: threading contract).
        self.published_at: dict[str, float] = {}

    def start(self) -> None:
        """Load the catalog's last revision and start the thread."""
        records = catalog.load_catalog(self.root)
        self._revision = max((r.revision for r in records.values()), default=0)
        self._thread.start()

    def submit(self, request: Request) -> None:
        """Queue a request (any thread)."""
        self._queue.put(request)

    def stop(self, timeout: float = 30.0) -> None:
        """Commit everything queued so far, then end the thread."""
        self._queue.put(None)
        self._thread.join(timeout)

    def next_seq(self, topic: str) -> int:
        """Next seq of ``topic`` (committer thread only)."""
        if topic not in self._next_seq:
            self._next_seq[topic] = delta.last_seq(layout.topic_table(self.root, topic)) + 1
        return self._next_seq[topic]

    # ------------------------------------------------------------------ thread

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            group: list[Request] = [first]
            size = _size(first)
            while len(group) < self._max_msgs and size < self._max_bytes:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                group.append(nxt)
                size += _size(nxt)
            try:
                results = self._commit_group(group)
            except BaseException as exc:  # last-resort guard: report, never lose silently
                log.exception("group commit failed")
                results = [Result(r, error=exc) for r in group]
            try:
                self._on_done(results)
            except Exception:
                log.exception("committer callback failed")

    def _commit_group(self, group: list[Request]) -> list[Result]:
        results: list[Result] = []
        publishes: dict[str, list[Publish]] = {}
        saves: list[SaveSubscription] = []
        acks: dict[str, list[Ack]] = {}
        dead: dict[str, list[DeadLetterMessage]] = {}
        links: list[LinkEvent] = []
        drops: list[DropTopic] = []
        txns: list[CommitTransaction] = []
        barriers: list[Barrier] = []
        for req in group:
            if isinstance(req, Barrier):
                barriers.append(req)
            elif isinstance(req, CommitTransaction):
                txns.append(req)
                for item in req.publishes:
                    publishes.setdefault(item.topic, []).append(item)
            elif isinstance(req, DropTopic):
                drops.append(req)
            elif isinstance(req, LinkEvent):
                links.append(req)
            elif isinstance(req, DeadLetterMessage):
                dead.setdefault(req.table, []).append(req)
            elif isinstance(req, Ack):
                acks.setdefault(req.table, []).append(req)
            elif isinstance(req, CreateTopic):
                results.append(self._create_topic(req))
            elif isinstance(req, SaveSubscription):
                saves.append(req)
            else:
                publishes.setdefault(req.topic, []).append(req)
        if saves:
            results.extend(self._save_subscriptions(saves))
        for topic, items in publishes.items():
            results.extend(self._append_topic(topic, items))
        if txns:
            results = _transaction_results(results, txns)
        for table, letters in dead.items():
            results.extend(self._append_dead_letters(table, letters, acks))
        for table, items in acks.items():
            results.extend(r for r in self._append_acks(table, items) if not isinstance(r.request, _DeadLetterAck))
        if links:
            results.extend(self._append_links(links))
        results.extend(self._drop_topic(req) for req in drops)
        results.extend(Result(req) for req in barriers)  # after every commit of the group
        return results

    def _drop_topic(self, req: DropTopic) -> Result:
        path = layout.topic_table(self.root, req.topic)
        try:
            delta.remove_table(path)
        except Exception as exc:
            log.exception("removing topic %s failed", req.topic)
            return Result(req, error=exc)
        finally:
            self._appenders.pop(path, None)
            self._next_seq.pop(req.topic, None)
            self.published_at.pop(req.topic, None)
            self._cache.forget_topic(req.topic)
        return Result(req, value=path)

    def _append(self, path: str, data: pa.Table) -> None:
        """Commit ``data`` to the table at ``path`` with its cached appender.

        On failure the appender is dropped (the next attempt reloads the table) and the error
        is raised to the caller, which fails the group's requests for that table.
        """
        appender = self._appenders.get(path)
        if appender is None:
            appender = self._appenders[path] = delta.TableAppender(path, data.schema, fsync=self._fsync)
        try:
            appender.append(data)
        except Exception:
            self._appenders.pop(path, None)
            raise

    def _append_links(self, items: list[LinkEvent]) -> list[Result]:
        now = dt.datetime.now(dt.UTC)
        rows = [dict(item.row, at=now) for item in items]
        try:
            self._append(layout.join(self.root, layout.LINKS_TABLE), pa.Table.from_pylist(rows, schema=schemas.LINKS))
        except Exception as exc:
            log.exception("link event commit failed")
            return [Result(item, error=exc) for item in items]
        return [Result(item) for item in items]

    def _append_acks(self, table: str, items: list[Ack]) -> list[Result]:
        now = dt.datetime.now(dt.UTC)
        rows: dict[str, list[Any]] = {"seq": [], "outcome": [], "acked_at": [], "consumer": []}
        for item in items:
            for seq in item.seqs:
                rows["seq"].append(seq)
                rows["outcome"].append(item.outcome)
                rows["acked_at"].append(now)
                rows["consumer"].append(item.consumer)
        try:
            self._append(layout.join(self.root, table), pa.Table.from_pydict(rows, schema=schemas.ACK))
        except Exception as exc:
            log.exception("ack commit to %s failed", table)
            return [Result(item, error=exc) for item in items]
        return [Result(item) for item in items]

    def _append_dead_letters(
        self, table: str, items: list[DeadLetterMessage], acks: dict[str, list[Ack]]
    ) -> list[Result]:
        """Commit dead-letter rows; queue their ack-log rows into ``acks`` (committed after)."""
        now = dt.datetime.now(dt.UTC)
        rows = [dict(item.row, dead_lettered_at=now) for item in items]
        try:
            self._append(layout.join(self.root, table), pa.Table.from_pylist(rows, schema=schemas.DEAD_LETTER))
        except Exception as exc:
            log.exception("dead-letter commit to %s failed", table)
            return [Result(item, error=exc) for item in items]
        for item in items:
            if item.ack_table is not None:
                acks.setdefault(item.ack_table, []).append(
                    _DeadLetterAck(item.ack_table, [int(item.row["seq"])], "dead-lettered", item.row.get("consumer") or "")
                )
        return [Result(item) for item in items]

    def _create_topic(self, req: CreateTopic) -> Result:
        try:
            path = delta.create_topic(self.root, req.topic)
        except TopicExists:
            path = layout.topic_table(self.root, req.topic)
        except Exception as exc:
            return Result(req, error=exc)
        return Result(req, value=path)

    def _save_subscriptions(self, saves: list[SaveSubscription]) -> list[Result]:
        now = dt.datetime.now(dt.UTC)
        records = []
        for s in saves:
            self._revision += 1
            changes: dict[str, Any] = {"revision": self._revision, "updated_at": now}
            if s.assign_start:
                changes["start_seq"] = self.next_seq(s.record.topic)
            records.append(dataclasses.replace(s.record, **changes))
        try:
            catalog.append_records(self._catalog, records)
        except Exception as exc:
            log.exception("catalog commit failed")
            return [Result(s, error=exc) for s in saves]
        return [Result(s, value=r) for s, r in zip(saves, records, strict=True)]

    def _append_topic(self, topic: str, items: list[Publish]) -> list[Result]:
        try:
            first = self.next_seq(topic)
            now = dt.datetime.now(dt.UTC)
            columns: dict[str, list[Any]] = {name: [] for name in schemas.TOPIC.names}
            for i, item in enumerate(items):
                columns["seq"].append(first + i)
                columns["published_at"].append(now)
                columns["message"].append(item.message)
                for name, value in item.columns.items():
                    columns[name].append(value)
            t0 = time.perf_counter()
            self._append(layout.topic_table(self.root, topic), pa.Table.from_pydict(columns, schema=schemas.TOPIC))
            self.commits += 1
            log.debug("committed %d messages to %s in %.1f ms", len(items), topic, 1e3 * (time.perf_counter() - t0))
        except Exception as exc:
            log.exception("commit to topic %s failed", topic)
            self._next_seq.pop(topic, None)  # re-read from the table before the next attempt
            return [Result(item, error=exc) for item in items]
        self._next_seq[topic] = first + len(items)
        self.published_at[topic] = now.timestamp()
        self._cache.put_many(topic, [(first + i, item.message) for i, item in enumerate(items)])
        return [Result(item, value=first + i) for i, item in enumerate(items)]


def _size(request: Request | None) -> int:
    """Bytes of message data a request brings into a group (its share of max_batch_bytes)."""
    if isinstance(request, Publish):
        return len(request.message)
    if isinstance(request, CommitTransaction):
        return sum(len(p.message) for p in request.publishes)
    return 0


def _transaction_results(results: list[Result], txns: list[CommitTransaction]) -> list[Result]:
    """Replace the results of transactions' own publishes with one result per transaction."""
    owner = {id(item): txn for txn in txns for item in txn.publishes}
    parts: dict[int, list[Result]] = {id(txn): [] for txn in txns}
    out = []
    for result in results:
        txn = owner.get(id(result.request))
        if txn is None:
            out.append(result)
        else:
            parts[id(txn)].append(result)
    for txn in txns:
        mine = parts[id(txn)]
        error = next((r.error for r in mine if r.error is not None), None)
        stored = sorted({r.request.topic for r in mine if r.error is None})  # type: ignore[union-attr]
        if error is not None and stored:
            # One Delta table per topic: what was written to the other topics stays written.
            error = RuntimeError(f"{error} (its messages to {', '.join(stored)} were stored)")
        out.append(Result(txn, error=error, value=None if error else [r.value for r in mine]))
    return out
