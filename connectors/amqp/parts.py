"""The parts a front end runs with, built outside it and passed in.

:func:`build_parts` makes the ones ``sharedsub serve``/``frontend`` use (sharedsub.serve calls it):
the group committer and the tailer threads, the payload cache they share, the dispatcher (which
owns delivery state), the counters and stage timings /metrics reads, the permissions, who
authenticated on each connection, the :class:`Inbox` through which the threads hand their
results to the front end's thread, and the cluster port with the membership behind it
(connectors/amqp/cluster_port.py; a member alone on a local data dir).
:class:`~connectors.amqp.handler.FrontEnd` and :class:`~connectors.amqp.server.FrontEndServer`
only use what they are given.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Protocol

import proton

from connectors.amqp.cluster_port import ClusterPort
from connectors.amqp.dispatcher import Dispatcher
from connectors.amqp.endpoint_state import EndpointState
from connectors.amqp.wire.engine_loop import Injector
from sharedsub.core.config import (
    Settings,
    ack_commit_interval,
    commit_signals,
    commit_slots,
    group_commit_interval,
    group_company,
    on_object_store,
    several_members,
    tail_idle_poll_interval,
    tail_poll_interval,
)
from sharedsub.core.delivery.outcomes import Limits
from sharedsub.core.fanout.change_notes import FANOUT_NOTE, NoteKeeper, note_name
from sharedsub.core.ops import metrics
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.core.publish.publish_window import PublishWindow
from sharedsub.core.security.authenticated import Identities
from sharedsub.runtime.cluster.membership import MemberSlot, build_membership
from sharedsub.runtime.commit_requests import Result
from sharedsub.runtime.commit_wake import CommitSignal
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.runtime.permissions_file import PolicyStore
from sharedsub.runtime.tailer import Row, Tailer
from sharedsub.storage.change_notes import NoteWriter
from sharedsub.storage.commits.append_process import AppendProcess
from sharedsub.storage.commits.commit_store import DeltaStore


class ThreadResults(Protocol):
    """What the front end's thread does with the other threads' results (FrontEnd is one)."""

    def committed(self, results: list[Result]) -> None:
        """A group commit's results: settle its publishers, run its requests' continuations."""

    def rows_read(self, key: str, watch: int, rows: list[Row], posted: float) -> None:
        """Rows the tailer read for subscription ``key`` in its watch ``watch`` (posted at ``time.perf_counter()``)."""


class _NotConnected:
    """The receiver of an :class:`Inbox` nothing was connected to: posting is a wiring defect."""

    def committed(self, results: list[Result]) -> None:
        raise RuntimeError("Inbox.connect was not called: the committer has no one to report to")

    def rows_read(self, key: str, watch: int, rows: list[Row], posted: float) -> None:
        raise RuntimeError("Inbox.connect was not called: the tailer has no one to report to")


class Inbox:
    """The committer's and the tailer's results on their way to the front end's thread, in the
    order they were posted (one :class:`~connectors.amqp.wire.engine_loop.Injector` queue).

    Posting is typed, a method per kind of result; the receiver is named once with
    :meth:`connect` before the threads start (FrontEnd connects itself when it is built).
    """

    def __init__(self, injector: Injector) -> None:
        self._injector = injector
        self._receiver: ThreadResults = _NotConnected()

    def connect(self, receiver: ThreadResults) -> None:
        """Hand every result posted from now on to ``receiver``, on the loop's thread."""
        self._receiver = receiver

    def committed(self, results: list[Result]) -> None:
        """The committer's results of one group (committer thread)."""
        self._injector.call(functools.partial(self._receiver.committed, results))

    def rows_read(self, key: str, watch: int, rows: list[Row]) -> None:
        """Rows the tailer read for ``key`` in its watch ``watch`` (tailer thread)."""
        self._injector.call(functools.partial(self._receiver.rows_read, key, watch, rows, time.perf_counter()))


@dataclasses.dataclass(frozen=True, slots=True)
class FrontEndParts:
    """Everything a front end is built from (see the module docstring)."""

    settings: Settings
    injector: Injector  # threads -> the engine loop (connectors.amqp.wire.engine_loop)
    inbox: Inbox  # the committer's and tailer's results -> the front end's thread
    cache: PayloadCache
    stages: StageTimes
    committer: Committer
    tailer: Tailer
    dispatcher: Dispatcher
    permissions: PolicyStore
    counters: metrics.Counters
    identities: Identities
    endpoints: EndpointState
    publish_window: PublishWindow[proton.Link]
    cluster: ClusterPort  # the membership and the front end's port to it


def build_parts(
    settings: Settings,
    *,
    after_unclean_stop: bool = False,
    permissions: PolicyStore | None = None,
    epoch: int | None = None,
    on_fenced: Callable[[str], None] | None = None,
    partition: int = 0,
    lapsed: Callable[[], str | None] | None = None,
    announced: bool = False,
) -> FrontEndParts:
    """The parts of a front end on ``settings``' data dir (nothing started yet).

    ``after_unclean_stop``: the previous front end on the data dir did not stop cleanly (see
    sharedsub.runtime.tailer.Tailer); ``permissions``: the policy store (None: no permissions
    file, the open policy); ``epoch``: the owner lease's epoch every commit carries (a data dir
    on object storage), ``on_fenced``: what stops the service when a commit meets a higher one;
    ``partition``: the topic partition this front end writes (its member slot); ``lapsed``:
    why its lease may be another's by now, asked before each write (sharedsub.runtime.committer);
    ``announced``: a fan-out job of this process announces the tables it writes to the tailer
    (``sharedsub serve``).
    With an ``epoch``, the membership is that of member slot ``partition`` (its fence token
    the epoch); without, of a front end alone on a local data dir.
    """
    injector = Injector()
    inbox = Inbox(injector)

    root = settings.data_dir
    cache = PayloadCache(settings.delivery.payload_cache_bytes)
    # Time per stage of the message path, exported on /metrics (sharedsub.core.ops.stage_timing).
    stages = StageTimes()
    store = DeltaStore(
        root,
        fsync=settings.storage.fsync,
        appends=AppendProcess(gc_tuning=settings.server.gc_tuning) if settings.storage.append_process else None,
        epoch=epoch,
        partition=partition,
    )
    committer = Committer(
        store,
        cache=cache,
        on_done=inbox.committed,
        max_batch_messages=settings.publish.max_batch_messages,
        max_batch_bytes=settings.publish.max_batch_bytes,
        min_commit_interval=group_commit_interval(settings),
        full_disk_timeout=settings.storage.full_disk_timeout,
        stages=stages,
        on_fenced=on_fenced,
        lapsed=lapsed,
        shared_catalog=several_members(settings),
        ack_interval=ack_commit_interval(settings),
        # On a bucket the fan-out learns of topic commits from this writer's note, not by
        # probing every topic table (sharedsub.core.fanout.change_notes).
        change_notes=(
            NoteWriter(root, note_name(partition), NoteKeeper(epoch))
            if epoch is not None and on_object_store(settings)
            else None
        ),
        # On a local data dir the fan-out's source starts a batch at this signal, not at its next
        # probe (sharedsub.core.fanout.batch_hold).
        commit_signal=CommitSignal(root) if commit_signals(settings) else None,
        # On Spark's trigger grid, one group per trigger lands just before it (commit_pace).
        commit_slots=commit_slots(settings),
        # When each commit starts a micro-batch, a group waits for the company a batch would.
        company=group_company(settings),
    )
    tailer = Tailer(
        root,
        cache,
        inbox.rows_read,
        poll_interval=tail_poll_interval(settings),
        idle_poll_interval=tail_idle_poll_interval(settings),
        after_unclean_stop=after_unclean_stop,
        stages=stages,
        partitioned=several_members(settings),
        announced=announced,
        # On a bucket, without the embedded job's announcements: the job's change note says
        # which tables it wrote (sharedsub.core.fanout.change_notes).
        change_note=FANOUT_NOTE if on_object_store(settings) and not announced else None,
    )
    # Counters of the front end's thread, read by the metrics endpoint (sharedsub.core.ops.metrics: threading).
    counters = metrics.Counters()
    dispatcher = Dispatcher(
        committer.submit,
        tailer.sent,
        limits=Limits(max_delivery_count=settings.delivery.max_delivery_count),
        counters=counters,
        stages=stages,
    )
    return FrontEndParts(
        settings=settings,
        injector=injector,
        inbox=inbox,
        cache=cache,
        stages=stages,
        committer=committer,
        tailer=tailer,
        dispatcher=dispatcher,
        permissions=permissions if permissions is not None else PolicyStore(""),
        counters=counters,
        # Who authenticated on each connection (the listener records it; sharedsub.core.security.authenticated).
        identities=Identities(),
        # What the front end keeps about links, connections and transfers (not on proton's objects).
        endpoints=EndpointState(),
        # Bytes handed to the committer and not committed yet, over all publishers.
        publish_window=PublishWindow(settings.publish.max_uncommitted_bytes),
        cluster=ClusterPort(
            injector,
            lambda local, post: build_membership(
                settings, MemberSlot(partition, epoch) if epoch is not None else None, local=local, post=post
            ),
        ),
    )
