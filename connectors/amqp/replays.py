"""Replay inside a running front end (``POST /admin/replay``, ``sharedsub replay``).

:func:`replay` returns an operation with the shape :meth:`connectors.amqp.server.FrontEndServer.call`
runs, ``op(front_end, future)``, in three steps:

1. **Reactor thread**: resolve the subscription among the active ones held in memory; refuse a
   non-durable one (:class:`~sharedsub.core.errors.ReplayNotDurable`) or one already being replayed
   (:class:`~sharedsub.core.errors.ReplayInProgress`); wait until every acknowledgement taken so
   far is in the ack log (a committer barrier), since the plan counts only what the log settles.
2. **Worker thread** (one per replay; the I/O must not block the reactor):
   :func:`sharedsub.storage.replay_tables.replay_tables` picks the start version, reads the
   table's past and writes the ``replayed`` ack-log rows and the restored rows.
3. **Reactor thread** again (:meth:`connectors.amqp.handler.FrontEnd.run_on_reactor`): the
   reopened seqs are no longer held as acknowledged and the tailer loads the subscription's
   backlog again (:meth:`connectors.amqp.consumers.Subscriptions.reopen`), so the consumers
   attached now receive the replayed messages — first-acquirer false, delivery-count from the
   ack log (at least 1), in seq order — and rows already waiting or outstanding are not
   queued twice. ``future`` gets the :class:`~sharedsub.core.ops.replay.ReplayReport` as JSON.

Nothing here touches another subscription: only this one's ack log, table, acknowledged set and
feed change. Without consumers attached the replayed messages wait in the backlog for the next.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading

from connectors.amqp.admin_ops import Op
from connectors.amqp.handler import FrontEnd
from sharedsub.core.errors import ReplayNotDurable
from sharedsub.core.ops.replay import ReplayReport
from sharedsub.runtime.inspection import display_name, find_subscription
from sharedsub.storage.replay_tables import ReplayDone, replay_tables

log = logging.getLogger(__name__)

def replay(name: str, *, version: int | None = None, timestamp_ms: int | None = None) -> Op:
    """``replay SUB --version V | --timestamp T`` (exactly one of the two; T in ms since the epoch)."""

    def op(front: FrontEnd, future: concurrent.futures.Future[dict[str, object]]) -> None:
        subs = front.subscriptions
        rec = find_subscription(subs.records, name)  # active records only
        shown = display_name(rec)
        if not rec.identity.durable:
            raise ReplayNotDurable(shown)
        subs.begin_replay(rec, shown)
        retention = front.settings.maintenance.history_retention_hours

        def finish(done: ReplayDone | None, error: BaseException | None) -> None:  # reactor thread
            subs.end_replay(rec)
            if error is not None:
                if not future.done():
                    future.set_exception(error)
                return
            assert done is not None
            consumers = subs.reopen(rec, done.reopen)
            report = ReplayReport(
                key=rec.key,
                name=shown,
                generation=rec.generation,
                version=done.version,
                version_at=done.version_at,
                latest_version=done.latest_version,
                messages=len(done.plan.seqs),
                reopened=len(done.reopen),
                restored=len(done.plan.restore),
                consumers=consumers,
            )
            log.info("admin: %s", report.describe(), extra={"subscription": rec.key})
            if not future.done():
                future.set_result({"ok": True, "replay": report.to_json(), "message": report.describe()})

        def work() -> None:  # worker thread: table I/O only, then back to the reactor
            try:
                done = replay_tables(
                    front.root,
                    rec,
                    shown,
                    version=version,
                    timestamp_ms=timestamp_ms,
                    retention_hours=retention,
                )
            except Exception as exc:  # noqa: BLE001 (reported to the caller through the future)
                log.info("admin: replay of %s refused or failed: %s", rec.key, exc)
                failure = exc
                front.run_on_reactor(lambda: finish(None, failure))
                return
            front.run_on_reactor(lambda: finish(done, None))

        # The plan counts what the ack log settles: the acknowledgements taken so far go there first.
        subs.after_acks_stored(
            lambda: threading.Thread(target=work, name=f"sharedsub-replay-{rec.key[:24]}", daemon=True).start()
        )

    return op
