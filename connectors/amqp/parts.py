"""The parts a front end runs with, built outside it and passed in.

:func:`build_parts` makes the ones ``sharedsub serve``/``frontend`` use (sharedsub.serve calls it):
the group committer and the tailer threads, the payload cache they share, the counters and stage
timings /metrics reads, the permissions, who authenticated on each connection, and the event
injector through which the threads hand results to the reactor. :class:`~connectors.amqp.handler.FrontEnd`
and :class:`~connectors.amqp.server.FrontEndServer` only use what they are given.
"""

from __future__ import annotations

import dataclasses
import time

import proton
from proton.reactor import ApplicationEvent

from connectors.amqp.delivery import Row, Tailer
from connectors.amqp.endpoint_state import EndpointState
from connectors.amqp.engine_loop import Injector
from sharedsub.core.config import Settings
from sharedsub.core.ops import metrics
from sharedsub.core.ops.stage_timing import StageTimes
from sharedsub.core.publish.publish_window import PublishWindow
from sharedsub.core.security.authenticated import Identities
from sharedsub.runtime.committer import Committer, Result
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.runtime.permissions_file import PolicyStore
from sharedsub.storage.commits.append_process import AppendProcess
from sharedsub.storage.commits.commit_store import DeltaStore

COMMITTED = "sharedsub_committed"
"""Event the committer's results reach the reactor as (FrontEnd.on_sharedsub_committed)."""
ROWS = "sharedsub_rows"
"""Event the tailer's new rows reach the reactor as (FrontEnd.on_sharedsub_rows)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FrontEndParts:
    """Everything a front end is built from (see the module docstring)."""

    settings: Settings
    injector: Injector  # threads -> the engine loop (connectors.amqp.engine_loop)
    cache: PayloadCache
    stages: StageTimes
    committer: Committer
    tailer: Tailer
    permissions: PolicyStore
    counters: metrics.Counters
    identities: Identities
    endpoints: EndpointState
    publish_window: PublishWindow[proton.Link]


def build_parts(settings: Settings, *, after_unclean_stop: bool = False, permissions: PolicyStore | None = None) -> FrontEndParts:
    """The parts of a front end on ``settings``' data dir (nothing started yet).

    ``after_unclean_stop``: the previous front end on the data dir did not stop cleanly (see
    delivery.Tailer); ``permissions``: the policy store (None: no permissions file, the open policy).
    """
    injector = Injector()

    def post_results(results: list[Result]) -> None:
        injector.trigger(ApplicationEvent(COMMITTED, subject=results))

    def post_rows(key: str, rows: list[Row]) -> None:
        injector.trigger(ApplicationEvent(ROWS, subject=(key, rows, time.perf_counter())))

    root = settings.data_dir
    cache = PayloadCache(settings.delivery.payload_cache_bytes)
    # Time per stage of the message path, exported on /metrics (sharedsub.core.ops.stage_timing).
    stages = StageTimes()
    store = DeltaStore(
        root, fsync=settings.storage.fsync, appends=AppendProcess() if settings.storage.append_process else None
    )
    committer = Committer(
        store,
        cache=cache,
        on_done=post_results,
        max_batch_messages=settings.publish.max_batch_messages,
        max_batch_bytes=settings.publish.max_batch_bytes,
        min_commit_interval=settings.publish.min_commit_interval,
        full_disk_timeout=settings.storage.full_disk_timeout,
        stages=stages,
    )
    tailer = Tailer(
        root,
        cache,
        post_rows,
        poll_interval=settings.delivery.poll_interval,
        after_unclean_stop=after_unclean_stop,
        stages=stages,
    )
    return FrontEndParts(
        settings=settings,
        injector=injector,
        cache=cache,
        stages=stages,
        committer=committer,
        tailer=tailer,
        permissions=permissions if permissions is not None else PolicyStore(""),
        # Reactor-thread counters read by the metrics endpoint (sharedsub.core.ops.metrics: threading).
        counters=metrics.Counters(),
        # Who authenticated on each connection (the listener records it; sharedsub.core.security.authenticated).
        identities=Identities(),
        # What the front end keeps about links, connections and transfers (not on proton's objects).
        endpoints=EndpointState(),
        # Bytes handed to the committer and not committed yet, over all publishers.
        publish_window=PublishWindow(settings.publish.max_uncommitted_bytes),
    )
