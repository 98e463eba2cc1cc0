"""Group commit: the single writer of topic tables and of the subscription catalog.

One thread drains a queue of requests and turns everything that is waiting into as few Delta
commits as possible: one catalog commit, then one commit per topic. A caller learns the outcome
through ``on_done`` (called on the committer thread, with every result of the group); the AMQP
front end uses it to settle publishers only after their message's commit.

Ordering is the guarantee the fan-out relies on: a subscription registered in a group gets
``start_seq`` = the topic's next seq *before* that group's messages, and the catalog commit
happens before the topic commit, so any message with ``seq >= start_seq`` is committed after
the subscription is visible in the catalog.

A write the data dir cannot take (no space left, over quota, read-only file system, an object
store that does not answer) is held and
retried as it was, and given up on only after ``full_disk_timeout`` seconds of such faults; the
rules, and what giving up does to each kind of request, are in sharedsub.core.publish.write_faults. Holding
a write blocks the thread, which keeps every ordering above: nothing queued behind a held write
is committed before it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import NotRequired, TypedDict, TypeVar

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.core.errors import StorageUnavailable, SubscriptionMoved, TopicExists
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.core.publish import write_faults
from sharedsub.core.publish.commit_pace import FULL_GROUP, Company, collect_for, slot_floor
from sharedsub.runtime.commit_requests import (
    Ack,
    CommitTransaction,
    CreateTopic,
    DeadLetterMessage,
    DropTopic,
    Group,
    LinkEvent,
    Publish,
    Request,
    Result,
    SaveSubscription,
)
from sharedsub.runtime.commit_wake import CommitSignal
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage import schemas
from sharedsub.storage.change_notes import NoteWriter
from sharedsub.storage.commits.append_process import lost_commit_race
from sharedsub.storage.commits.commit_store import Appender, CommitStore
from sharedsub.storage.commits.py_columns import PyColumns
from sharedsub.storage.delta.appender import Fenced
from sharedsub.storage.topic_rows import topic_batch

log = logging.getLogger(__name__)

NOTE_RETRY = 1.0
"""Seconds an idle committer waits before trying again a change note the store did not take."""

_T = TypeVar("_T")

ACK_SLICE = 0.05
"""Seconds a group commit spends at most on acknowledgement logs beyond the first
(Committer._append_ack_logs); the others wait for a later group."""

ACK_REST = 4 * ACK_SLICE
"""Seconds after a slice that left logs before the next slice of acknowledgement logs (those
with a continuation excepted): the acknowledgements of many subscriptions take at most about
a fifth of the committer's time, gathering more rows per commit meanwhile."""


class _RecordChanges(TypedDict):
    """What a catalog save changes in a record (``dataclasses.replace``)."""

    revision: int
    updated_at: dt.datetime
    start_seq: NotRequired[int]
    start_seqs: NotRequired[tuple[tuple[int, int], ...]]


class _DeadLetterAck(Ack):
    """The ack-log row of a dead-lettered message (internal: its result is the dead letter's)."""

    __slots__ = ()


class LeaseLapsed(Exception):
    """A write was not made: this front end's lease may be another's by now (Committer's ``lapsed``)."""


class Committer:
    """The group-commit thread. Start with :meth:`start`, stop with :meth:`stop` (drains first)."""

    def __init__(
        self,
        store: CommitStore,
        *,
        cache: PayloadCache,
        on_done: Callable[[list[Result]], None],
        max_batch_messages: int = 5000,
        max_batch_bytes: int = 16 * 1024 * 1024,
        min_commit_interval: float = 0.0,
        full_disk_timeout: float = 60.0,
        stages: StageTimes | None = None,
        on_fenced: Callable[[str], None] | None = None,
        lapsed: Callable[[], str | None] | None = None,
        shared_catalog: bool = False,
        ack_interval: float = 0.0,
        change_notes: NoteWriter | None = None,
        commit_signal: CommitSignal | None = None,
        commit_slots: tuple[float, float] | None = None,
        company: Company | None = None,
    ) -> None:
        """``store``: where everything is written (sharedsub.storage.commits.commit_store: the Delta
        tables of a data dir, with or without fsync and an append child process; or memory, in
        tests of this thread). ``full_disk_timeout``: seconds a write the data dir cannot take is
        held before it is given up on (sharedsub.core.publish.write_faults). ``min_commit_interval``:
        seconds from one group's start to the next group's (what arrives meanwhile joins the
        next group; a stop does not wait for it, nor a request that is ``awaited``:
        sharedsub.core.publish.commit_pace). ``stages``: where the
        ``group_commit`` and ``ack_commit`` times go (sharedsub.core.ops.stage_timing; this thread is
        their only writer). The store is started with :meth:`start` and stopped with :meth:`stop`.
        ``on_fenced(reason)``: called (on this thread) when a write finds the table taken under a
        higher owner epoch: another front end owns the data dir, this one must stop.
        ``lapsed()``: why this front end's lease may be another's by now (None: it is held),
        asked before every write: a process paused past its lease (SIGSTOP, a long GC, a frozen
        VM) writes nothing more, not even to tables shared with other members, whose log marks
        do not fence it (sharedsub.core.ownership.members.supersedes); it is reported like a
        fence. ``shared_catalog``: other members commit catalog revisions too, so the highest
        one is read again before each catalog commit (a revision only ever grows: a later
        record of a subscription wins over an earlier one). ``ack_interval``: the least seconds
        between two commits of one acknowledgement log (``[storage] object_ack_interval`` on
        object storage, where each is two billed requests; 0 locally): acknowledgements that
        come sooner wait for the next, as those a slice leaves do (:meth:`_append_ack_logs`).
        ``change_notes``: on object storage, this writer's note (sharedsub.core.fanout.change_notes):
        the topic tables it commits are noted after each group, once its results are handed on;
        a note the store does not take is tried again after the next group, or within
        :data:`NOTE_RETRY` seconds when none comes. ``commit_signal``: on a local data dir, told
        after each group that committed a topic table, before its results are handed on (the
        fan-out's source starts a batch then: sharedsub.core.fanout.batch_hold). ``commit_slots``:
        ``(period, lead)``: a group held by the interval starts at the first slot at its end, so that
        one group per fan-out trigger lands just before the trigger (sharedsub.core.publish.commit_pace,
        ``[publish] commit_lead``); None: at the interval's end. ``company``: under light traffic a
        group waits for company after the interval (when the fan-out starts a micro-batch at each
        commit: sharedsub.core.publish.commit_pace.Company); None: it does not."""
        self.store = store
        self._shared_catalog = shared_catalog
        self._on_fenced = on_fenced
        self._lapsed = lapsed
        self.root = store.root
        self._stages = stages if stages is not None else StageTimes()
        self._cache = cache
        self._on_done = on_done
        self._max_msgs = max_batch_messages
        self._max_bytes = max_batch_bytes
        self._min_interval = min_commit_interval
        self._floor_until = 0.0  # time.monotonic() before which a new group waits for more (commit_pace)
        self._slots = commit_slots
        self._company = company
        self._group_started = -math.inf  # time.monotonic() when the last group started (commit_pace.Company)
        self._wake = threading.Event()  # set by an awaited request, a full group or a stop: the group waits no longer
        # Publishes submitted, and publishes in groups already collected: their difference is
        # the group being collected and what is queued, which submit and _fill compare with
        # commit_pace.FULL_GROUP. Each count has one writing thread (the submitting one's; the
        # committer's) and is read by the other; one lost to two submitting threads at once only
        # has that group wait for its interval.
        self._publishes_in = self._publishes_grouped = 0
        self._queue: queue.SimpleQueue[Request | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sharedsub-committer", daemon=True)
        self._appenders: dict[str, Appender] = {}  # by table path
        self._next_seq: dict[str, int] = {}
        self._prepared: set[str] = set()  # topics whose partition of this writer has its table
        self._catalog = store.catalog_appender()
        self._revision = 0
        self.commits = 0
        self._faults = write_faults.FaultClock(write_faults.RetryPolicy(full_disk_timeout))
        self._stopping = threading.Event()
        # Settlement records given up on during a fault, oldest first: re-tried ahead of every
        # later group (sharedsub.core.publish.write_faults PARK).
        self._parked: list[Request] = []
        # Acknowledgements a group left for the next (_append_ack_logs): they go first in it.
        self._deferred: list[Request] = []
        self._acks_rest_until = 0.0  # (time.monotonic()) no slice of them before then
        self._ack_interval = ack_interval
        self._ack_committed_at: dict[str, float] = {}  # ack log -> time.monotonic() of its last commit
        # Failed tries of writes the data dir could not take, by errno name (ENOSPC, ...); written
        # by this thread only, read by the metrics endpoint with dict.copy().
        self.write_errors: dict[str, int] = {}
        # Newest published_at (epoch seconds) committed per topic; written by this thread only,
        # read by the metrics endpoint with dict.copy() (sharedsub.core.ops.metrics: threading contract).
        self.published_at: dict[str, float] = {}
        self._notes = change_notes
        self._signal = commit_signal
        self._topic_committed = False  # a topic table got a commit in the group being committed

    def start(self) -> None:
        """Load the catalog's last revision and start the thread."""
        self._revision = self.store.catalog_revision()
        self.store.start()
        self._thread.start()

    def submit(self, request: Request) -> None:
        """Queue a request (any thread)."""
        full = False
        if isinstance(request, Publish):
            self._publishes_in += 1
            pending = self._publishes_in - self._publishes_grouped
            # (== for company: woken once as the group gets it, not by every publish after)
            full = pending >= FULL_GROUP or (self._company is not None and pending == self._company.publishes)
        self._queue.put(request)
        if request.awaited or full:
            self._wake.set()  # the group being collected is committed now (_fill)

    def stop(self, timeout: float = 30.0) -> None:
        """Commit everything queued so far, then end the thread. Writes the data dir cannot take
        are given up on at once (publishes refused; parked settlement records are lost and
        their messages delivered again after the restart: logged)."""
        self._stopping.set()
        self._queue.put(None)
        self._wake.set()
        self._thread.join(timeout)
        self.store.stop()

    @property
    def fault(self) -> write_faults.Fault | None:
        """The storage fault in progress (None while the data dir takes writes); any thread."""
        return self._faults.fault

    def storage_status(self) -> dict[str, object]:
        """The data dir's state for /health (any thread): ``writable``; during a fault also
        ``error``, ``errno``, ``path`` (what failed first), ``since`` (epoch seconds),
        ``refusing`` (past full_disk_timeout: publishes are refused) and ``parked`` (settlement
        records waiting in memory)."""
        fault = self._faults.fault
        if fault is None:
            return {"writable": True, "parked": len(self._parked)}
        return {
            "writable": False,
            "error": fault.message,
            "errno": fault.name,
            "path": fault.path,
            "since": fault.since_wall,
            "refusing": time.monotonic() - fault.since >= self._faults.policy.timeout,
            "parked": len(self._parked),
        }

    def next_seq(self, topic: str) -> int:
        """Next seq of ``topic`` (committer thread only). Reading it is held through a storage
        fault like a write (:meth:`_write`): on object storage it is a request, and a store
        that does not answer must hold the publishers, not fail them.

        Raises:
            StorageUnavailable: given up (as for a write).
        """
        if topic not in self._next_seq:
            path = self.store.topic_path(topic)
            self._next_seq[topic] = self._write(path, lambda: self.store.last_seq(topic) + 1)
        return self._next_seq[topic]

    # ------------------------------------------------------------------ thread

    def _run(self) -> None:
        stopping = False
        self._write_note()  # a new writer's first note: readers probe every table once
        while not stopping:
            wait = self._faults.idle_wait(bool(self._parked))
            if self._notes is not None and self._notes.due:  # a note the store did not take yet
                wait = NOTE_RETRY if wait is None else min(wait, NOTE_RETRY)
            if self._deferred:  # acknowledgements left by the last group: a group takes them after the rest
                soon = max(self._min_interval, self._acks_rest_until - time.monotonic(), 0.001)
                wait = soon if wait is None else min(wait, soon)
            idle = False  # no request came while waiting (a fault or parked writes to act on)
            first: Request | None = None
            try:
                first = self._queue.get(timeout=wait)
            except queue.Empty:
                idle = True
            # Parked settlement records go first: they are older than anything queued.
            group, self._parked, self._deferred = [*self._parked, *self._deferred], [], []
            if first is not None:
                group.append(first)
                stopping = self._fill(group, first)
            elif not idle:
                stopping = True
            if not group:
                if idle:
                    self._probe()
                    self._write_note()
                continue
            started = time.monotonic()
            try:
                results = self._commit_group(group, flush=stopping)
            except BaseException as exc:  # last-resort guard: report, never lose silently
                log.exception("group commit failed")
                results = [Result(r, error=exc) for r in group]
            if self._topic_committed and self._signal is not None:
                self._signal.send()
            self._topic_committed = False
            if results:
                try:
                    self._on_done(results)
                except Exception:
                    log.exception("committer callback failed")
            self._write_note()
            self._floor_until = self._next_floor(started)  # what arrives before then makes the next group
            self._group_started = started
        if self._parked:
            log.error(
                "stopping with %d settlement record(s) not written (data dir %s cannot take writes): "
                "their messages are delivered again after the restart",
                len(self._parked), self.root,
            )

    def _next_floor(self, started: float) -> float:
        """The time (``time.monotonic()``) before which a group after the one ``started`` then
        waits for more: the interval's end, or with commit slots
        sharedsub.core.publish.commit_pace.slot_floor (on the wall clock, as Spark's trigger)."""
        if self._slots is None:
            return started + self._min_interval
        period, lead = self._slots
        wall = time.time() - time.monotonic()
        return slot_floor(started + wall, min_interval=self._min_interval, period=period, lead=lead) - wall

    def _fill(self, group: list[Request], first: Request) -> bool:
        """Add to ``group`` (which ends with ``first``, just taken) what else is queued, up to the
        group's bounds; within the commit interval also what arrives before it is over, unless a
        request of the group is awaited (sharedsub.core.publish.commit_pace). Returns whether a
        stop was asked for (it ends the wait: what is queued is committed at once).

        The thread sleeps through the interval and is woken only by an awaited request, by the
        group's publishes reaching commit_pace.FULL_GROUP with those queued (or the company it
        waits for: commit_pace.Company), or by a stop; then
        it takes what is queued: taking requests one by one as they came woke it (and
        had it take the GIL from the reactor) for every acknowledgement of a fast consumer."""
        taken, size, awaited = 1, first.size, first.awaited
        publishes = int(isinstance(first, Publish))
        social = isinstance(first, Publish) and first.company  # a publish of the group may wait for company
        try:
            while True:
                self._wake.clear()  # before draining: an awaited request queued after this sets it again
                while taken < self._max_msgs and size < self._max_bytes:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        return True
                    group.append(nxt)
                    taken += 1
                    size += nxt.size
                    awaited = awaited or nxt.awaited
                    if isinstance(nxt, Publish):
                        publishes += 1
                        social = social or nxt.company
                if taken >= self._max_msgs or size >= self._max_bytes:
                    return False
                # The group's publishes and those queued (submit wakes the thread on the same sum).
                pending = self._publishes_in - self._publishes_grouped
                company = self._company if social else None
                now = time.monotonic()
                left = collect_for(self._floor_until, now, awaited, publishes, company=company, started=self._group_started)
                if left <= 0:
                    return False
                if pending < FULL_GROUP:
                    self._wake.wait(left)
        finally:
            self._publishes_grouped += publishes

    # ------------------------------------------------------------------ change notes

    def _noted(self, path: str) -> None:
        """The topic table at ``path`` got a commit just now (its note and the commit signal
        follow the group)."""
        self._topic_committed = True
        if self._notes is not None:
            self._notes.committed([_relative(self.root, path).removeprefix(layout.TOPICS_DIR + "/")])

    def _write_note(self) -> None:
        """Store this writer's note when one is due (NoteWriter.flush), unless its lease may be
        another's by now: its last commits are then swept by the next writer's readers."""
        if self._notes is None or (self._lapsed is not None and self._lapsed() is not None):
            return
        self._notes.flush()

    # ------------------------------------------------------------------ storage faults

    def _write(self, path: str, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt`` (one write to ``path``); while it fails with a storage fault, hold it:
        try again with backoff until it succeeds or the fault outlasts full_disk_timeout
        (sharedsub.core.publish.write_faults). ``attempt`` must write the same thing each time.

        Raises:
            StorageUnavailable: given up (the fault outlasted the timeout, or the service stops).
            Whatever else ``attempt`` raises, at once.
        """
        tries = 0
        while True:
            try:
                lapsed = self._lapsed() if self._lapsed is not None else None
                if lapsed is not None:
                    raise LeaseLapsed(lapsed)
                out = attempt()
            except (Fenced, LeaseLapsed) as exc:  # superseded: nothing this front end writes may land any more
                if self._on_fenced is not None:
                    self._on_fenced(str(exc))
                raise
            except Exception as exc:
                code = write_faults.fault_errno(exc)
                if code is None:
                    raise
                tries += 1
                delay = self._failed(code, path, tries, landed=self.store.committed_unsynced(exc))
                if delay is None:
                    now = time.monotonic()
                    raise StorageUnavailable(
                        self.root, code, os.strerror(code), waited=self._faults.waited(now), timeout=self._faults.policy.timeout
                    ) from exc
                self._stopping.wait(delay)
                continue
            self._writable()
            return out

    def _failed(self, code: int, path: str, tries: int, *, landed: bool = False) -> float | None:
        """Count a failed try of a write; log the fault once when it starts and once when it
        outlasts the timeout. Returns the delay before the next try, None to give up.

        ``landed``: the write's commit is in the table, only its fsync failed. It is held past the
        timeout (until the service stops): its rows are visible and will be routed, so refusing
        its publishers would have them send again what is already stored."""
        name = write_faults.errno_name(code)
        self.write_errors[name] = self.write_errors.get(name, 0) + 1
        now = time.monotonic()
        started = self._faults.failure(code, path, now, time.time())
        if started is not None and code in write_faults.STORE_ERRNOS:
            log.error(
                "object store of data dir %s does not answer: %s (%s) writing %s. Writes are retried; "
                "publishes are held up to %g s (storage.full_disk_timeout), then refused",
                self.root, started.message, name, _relative(self.root, path), self._faults.policy.timeout,
                extra={"data_dir": self.root, "errno": name, "path": path},
            )
        elif started is not None:
            free = self.store.free_bytes()
            log.error(
                "data dir %s cannot take writes: %s (%s) writing %s; %s bytes free. Writes are retried; "
                "publishes are held up to %g s (storage.full_disk_timeout), then refused",
                self.root, started.message, name, _relative(self.root, path), "?" if free is None else free,
                self._faults.policy.timeout,
                extra={"data_dir": self.root, "errno": name, "path": path, "free_bytes": free},
            )
        delay = self._faults.retry_delay(now, tries, stopping=self._stopping.is_set())
        if delay is None and landed and not self._stopping.is_set():
            return self._faults.policy.max_delay
        if delay is None and not self._stopping.is_set() and self._faults.gave_up():
            log.error(
                "data dir %s still cannot take writes after %.0f s (%s): refusing publishes with %s "
                "until it does; acknowledgements are kept in memory meanwhile",
                self.root, self._faults.waited(now), name, StorageUnavailable.condition,
                extra={"data_dir": self.root, "errno": name},
            )
        return delay

    def _writable(self) -> None:
        """A write succeeded: end the fault in progress, if any (logged once)."""
        ended = self._faults.success()
        if ended is not None:
            fault, failed = ended
            log.warning(
                "data dir %s takes writes again after %.1f s (%d failed tries); held writes go on",
                self.root, time.monotonic() - fault.since, failed,
                extra={"data_dir": self.root, "errno": fault.name},
            )

    def _probe(self) -> None:
        """Idle during a fault: find out whether the data dir takes writes again (a small file
        written and removed), so /health recovers without waiting for traffic."""
        if self._faults.fault is None:
            return
        try:
            self.store.probe_write()
        except OSError as exc:
            if write_faults.fault_errno(exc) is None:
                log.debug("write probe of %s failed: %s", self.root, exc)
            return
        self._writable()

    def _commit_group(self, requests: list[Request], *, flush: bool = False) -> list[Result]:
        """Commit ``requests`` as one group: each joins its bucket (commit_requests.Group), and
        the buckets are committed in the order the module docstring promises: topic creations,
        catalog revisions, topic appends (transactions' with them), dead letters before the ack
        rows they add, acknowledgements, link events, topic drops, and barriers last.
        Acknowledgements of many ack logs may be left for the next groups
        (:meth:`_append_ack_logs`), unless ``flush`` (the last group) or the group holds a
        barrier or a transaction."""
        results: list[Result] = []
        parked: list[Request] = []  # settlement records given up on for now (write_faults.PARK)
        group = Group()
        for req in requests:
            req.join(group)
        results.extend(self._create_topic(req) for req in group.creates)
        if group.saves:
            results.extend(self._save_subscriptions(group.saves))
        for topic, publishes in group.publishes.items():
            results.extend(self._append_topic(topic, publishes))
        if group.transactions:
            results = _transaction_results(results, group.transactions)
        for table, letters in group.dead_letters.items():
            results.extend(self._append_dead_letters(table, letters, group.acks, parked))
        results.extend(
            r
            for r in self._append_ack_logs(group.acks, parked, everything=flush or bool(group.barriers or group.transactions))
            if not isinstance(r.request, _DeadLetterAck)
        )
        if group.links:
            results.extend(self._append_links(group.links, parked))
        results.extend(self._drop_topic(req) for req in group.drops)
        if parked:
            # A barrier promises that everything queued before it is committed: not yet. It waits
            # with the parked records and answers once they are written.
            self._parked.extend(parked)
            self._parked.extend(group.barriers)
        else:
            results.extend(Result(req) for req in group.barriers)  # after every commit of the group
        return results

    def _drop_topic(self, req: DropTopic) -> Result:
        path = self.store.topic_path(req.topic)
        try:
            self.store.remove_topic(req.topic)
        except Exception as exc:
            log.exception("removing topic %s failed", req.topic)
            return Result(req, error=exc)
        finally:
            self._forget_appender(path)
            self._next_seq.pop(req.topic, None)
            self._prepared.discard(req.topic)
            self.published_at.pop(req.topic, None)
            self._cache.forget_topic(req.topic)
        return Result(req, value=path)

    def _append(self, path: str, data: pa.Table | PyColumns, *, synced: bool = True) -> None:
        """Commit ``data`` to the table at ``path`` with its cached appender, held while the data
        dir cannot take it (:meth:`_write`).

        Every try carries the same commit id, so a try whose commit landed although the store
        raised is found and not made again (the Appender contract, sharedsub.storage.commits.commit_store).
        On failure the appender is dropped (the next attempt reloads the table) and the error is
        raised to the caller, which fails (or parks) the group's requests for that table.
        """
        appender = self._appenders.get(path)
        if appender is None:
            appender = self._appenders[path] = self.store.appender(path, data.schema, synced=synced)
        commit_id = uuid.uuid4().hex
        try:
            self._write(path, lambda: appender.append(data, commit_id=commit_id))
        except Exception:
            self._forget_appender(path)
            raise

    def _forget_appender(self, path: str) -> None:
        """Drop the appender of ``path``: the next append opens the table again."""
        appender = self._appenders.pop(path, None)
        if appender is not None:
            appender.close()

    def _append_links(self, items: list[LinkEvent], parked: list[Request]) -> list[Result]:
        now = dt.datetime.now(dt.UTC)
        rows = [dict(item.row, at=now) for item in items]
        try:
            self._append(layout.join(self.root, layout.LINKS_TABLE), pa.Table.from_pylist(rows, schema=schemas.LINKS))
        except StorageUnavailable:
            parked.extend(items)
            return []
        except Exception as exc:
            log.exception("link event commit failed")
            return [Result(item, error=exc) for item in items]
        return [Result(item) for item in items]

    def _append_ack_logs(self, acks: dict[str, list[Ack]], parked: list[Request], *, everything: bool) -> list[Result]:
        """Commit the acknowledgements of ``acks`` (by ack log), the longest waiting first, then
        force them to disk together (CommitStore.sync: one file-system sync, not an fsync per
        log). Unless ``everything``, logs left once :data:`ACK_SLICE` seconds went on others wait
        (:attr:`_deferred`) for a group at least :data:`ACK_REST` seconds later (the thread
        starts it without waiting for requests), gathering more rows meanwhile: with a thousand
        subscriptions acknowledging, one group committing every log kept the publishers queued
        behind it for seconds (issue 41). An acknowledgement with a continuation is never left."""
        results: list[Result] = []
        start = time.monotonic()
        deadline = start + ACK_SLICE
        resting = not everything and start < self._acks_rest_until
        committed = left = False
        due: float | None = None  # the soonest a log held back by ack_interval may commit
        for table, items in acks.items():
            awaited = any(item.token is not None for item in items)
            if not everything and not awaited:
                ready_at = self._ack_committed_at.get(table, float("-inf")) + self._ack_interval
                if resting or (committed and time.monotonic() >= deadline) or ready_at > start:
                    self._deferred.extend(items)
                    if ready_at > start:
                        due = ready_at if due is None else min(due, ready_at)
                    else:
                        left = True
                    continue
            results.extend(self._append_acks(table, items, parked))
            if self._ack_interval > 0:
                self._ack_committed_at[table] = time.monotonic()
            committed = True
        if left and not resting:
            # More logs than a slice takes: rest before the next slice, so that acknowledging
            # a thousand subscriptions takes at most about a fifth of the committer's time.
            self._acks_rest_until = time.monotonic() + ACK_REST
        elif due is not None and not resting:
            self._acks_rest_until = due  # the deferred wait for the soonest log's interval
        if committed:
            try:
                self.store.sync()
            except OSError as exc:  # the commits stand; a power loss now redelivers their rows
                log.warning("forcing acknowledgements to disk failed: %s", exc)
        return results

    def _append_acks(self, table: str, items: list[Ack], parked: list[Request]) -> list[Result]:
        now = dt.datetime.now(dt.UTC)
        rows: dict[str, list[object]] = {"seq": [], "outcome": [], "acked_at": [], "consumer": []}
        for item in items:
            for seq in item.seqs:
                rows["seq"].append(seq)
                rows["outcome"].append(item.outcome)
                rows["acked_at"].append(now)
                rows["consumer"].append(item.consumer)
        try:
            t0 = time.perf_counter()
            self._append(layout.join(self.root, table), pa.Table.from_pydict(rows, schema=schemas.ACK), synced=False)
            self._stages.observe("ack_commit", time.perf_counter() - t0)
        except StorageUnavailable:
            parked.extend(items)
            return []
        except Exception as exc:
            if lost_commit_race(exc):  # other members kept taking the log's next version: later
                log.info("ack commit to %s lost to other writers; tried again with the next group", table)
                parked.extend(items)
                return []
            log.exception("ack commit to %s failed", table)
            return [Result(item, error=exc) for item in items]
        return [Result(item) for item in items]

    def _append_dead_letters(
        self, table: str, items: list[DeadLetterMessage], acks: dict[str, list[Ack]], parked: list[Request]
    ) -> list[Result]:
        """Commit dead-letter rows; queue their ack-log rows into ``acks`` (committed after)."""
        now = dt.datetime.now(dt.UTC)
        rows = [dict(item.row, dead_lettered_at=now) for item in items]
        try:
            self._append(layout.join(self.root, table), pa.Table.from_pylist(rows, schema=schemas.DEAD_LETTER))
        except StorageUnavailable:
            parked.extend(items)  # their ack-log rows are queued once they are written
            return []
        except Exception as exc:
            log.exception("dead-letter commit to %s failed", table)
            return [Result(item, error=exc) for item in items]
        for item in items:
            if item.ack_table is not None:
                acks.setdefault(item.ack_table, []).append(
                    _DeadLetterAck(item.ack_table, [item.row["seq"]], "dead-lettered", item.row["consumer"])
                )
        return [Result(item) for item in items]

    def _create_topic(self, req: CreateTopic) -> Result:
        path = layout.topic_table(self.root, req.topic)

        def create() -> None:
            try:
                self.store.create_topic(req.topic)
            except TopicExists:  # created already (a try that raised after its commit, too)
                pass

        try:
            self._write(path, create)
        except Exception as exc:  # noqa: BLE001 (the result carries any failure to the caller)
            return Result(req, error=exc)
        self._noted(path)
        return Result(req, value=path)

    def _save_subscriptions(self, saves: list[SaveSubscription]) -> list[Result]:
        now = dt.datetime.now(dt.UTC)
        records = []
        moved: list[Result] = []
        commit_id = uuid.uuid4().hex
        try:
            if self._shared_catalog:
                latest = self._write(self._catalog.path, self.store.latest_records)
                self._revision = max(self._revision, max((r.revision for r in latest.values()), default=0))
                found = [(s, _moved(s, latest)) for s in saves]
                moved = [Result(s, error=SubscriptionMoved(m)) for s, m in found if m is not None]
                saves = [s for s, m in found if m is None]
                if not saves:
                    return moved
            for s in saves:
                self._revision += 1
                changes: _RecordChanges = {"revision": self._revision, "updated_at": now}
                if s.assign_start:
                    changes["start_seq"] = self.next_seq(s.record.topic)
                    others = self.store.partition_starts(s.record.topic)
                    changes["start_seqs"] = tuple(sorted(others.items()))
                records.append(dataclasses.replace(s.record, **changes))
            rows = pa.Table.from_pylist([r.to_row() for r in records], schema=schemas.CATALOG)
            self._write(self._catalog.path, lambda: self._catalog.append(rows, commit_id=commit_id))
        except StorageUnavailable as exc:
            return [Result(s, error=exc) for s in saves]
        except Exception as exc:
            log.exception("catalog commit failed")
            return [Result(s, error=exc) for s in saves]
        return [*moved, *(Result(s, value=r) for s, r in zip(saves, records, strict=True))]

    def _append_topic(self, topic: str, items: list[Publish]) -> list[Result]:
        try:
            if topic not in self._prepared:
                self._write(self.store.topic_path(topic), lambda: self.store.prepare_topic(topic))
                self._prepared.add(topic)
            first = self.next_seq(topic)
            now = dt.datetime.now(dt.UTC)
            t0 = time.perf_counter()
            self._append(self.store.topic_path(topic), topic_batch(first, now, items))
            self._stages.observe("group_commit", time.perf_counter() - t0)
            self.commits += 1
            log.debug("committed %d messages to %s in %.1f ms", len(items), topic, 1e3 * (time.perf_counter() - t0))
        except Exception as exc:
            if not isinstance(exc, StorageUnavailable):  # that one is logged when the fault starts
                log.exception("commit to topic %s failed", topic)
            self._next_seq.pop(topic, None)  # re-read from the table before the next attempt
            return [Result(item, error=exc) for item in items]
        self._next_seq[topic] = first + len(items)
        self._noted(self.store.topic_path(topic))
        self.published_at[topic] = now.timestamp()
        self._cache.put_many(topic, [(first + i, item.message) for i, item in enumerate(items)])
        return [Result(item, value=first + i) for i, item in enumerate(items)]


def _relative(root: str, path: str) -> str:
    """``path`` relative to the data dir ``root`` (as it is, when outside it)."""
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


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
        stored = sorted({r.request.topic for r in mine if r.error is None and isinstance(r.request, Publish)})
        if error is not None and stored:
            # One Delta table per topic: what was written to the other topics stays written.
            error = RuntimeError(f"{error} (its messages to {', '.join(stored)} were stored)")
        out.append(Result(txn, error=error, value=None if error else [r.seq() for r in mine]))
    return out


def _moved(save: SaveSubscription, latest: dict[str, SubscriptionRecord]) -> SubscriptionRecord | None:
    """The latest record of the saved key when another member got there first (several members
    share the catalog): a new generation that one of the same number or later exists for, or a
    change to a generation already followed by another. None: the save stands."""
    found = latest.get(save.record.key)
    if found is None or found.revision == save.record.revision:
        return None
    if save.assign_start:
        return found if found.generation >= save.record.generation else None
    return found if found.generation > save.record.generation else None
