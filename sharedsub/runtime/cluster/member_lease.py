"""Taking and holding the owner lease of a data dir on object storage (the rules are
sharedsub.core.ownership.lease's; the requests sharedsub.storage.cluster.lease_objects's).

:func:`take_lease` runs at start, before anything is written: it creates the lease, takes over
one that is released, left by a dead process of this host, or not renewed for its TTL, and
refuses (DataDirInUse, naming the holder's address) one that its holder renews. Watching a lease
takes at most its TTL; a line says so when it starts. :func:`take_slot` does the same over the
member slots of a data dir (sharedsub.core.ownership.members chooses the slot); ``take_lease``
is its case of one slot.

:class:`LeaseHolder` renews it on its own thread every ``renew_s`` and calls ``on_lost(reason)``
once when it is lost (taken over, or not renewable for ``ttl_s - renew_s``): the service then
stops (fail-stop). A second thread watches that deadline while a renewal request hangs (a store
that took the connection and does not answer keeps a request waiting for its client's timeout,
longer than the TTL): the holder stops on time, not when the request gives up.
:meth:`LeaseHolder.release` marks it released on a clean stop, so the next front end takes it at
once with the next epoch.

A renewal whose answer was lost may have landed: a refused renewal reads the lease back, and
one that still names this holder (with the renewal count it wrote) is kept, with its tag.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence

from sharedsub.core.errors import DataDirInUse
from sharedsub.core.ownership.lease import (
    Create,
    LeaseRecord,
    Lost,
    RenewalResult,
    Seen,
    TakeOver,
    decide_renewal,
)
from sharedsub.core.ownership.members import Full, TakeSlot, WatchSlots, decide_slot
from sharedsub.storage.cluster.lease_objects import create_lease, read_lease, replace_lease
from sharedsub.storage.objects.store import ObjectStore, PreconditionFailed, StoreFailure

log = logging.getLogger(__name__)


def take_lease(
    store: ObjectStore,
    key: str,
    me: LeaseRecord,
    *,
    pid_alive: Callable[[int], bool],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[LeaseRecord, str, float]:
    """Take the lease at ``key`` for ``me`` (its epoch is decided here): (the record written,
    its tag, ``clock()`` when the winning request was sent).

    Raises:
        DataDirInUse: a live front end holds it.
        StoreFailure: the store did not answer.
    """
    return take_slot(store, [key], me, pid_alive=pid_alive, clock=clock, sleep=sleep)[1]


def take_slot(
    store: ObjectStore,
    keys: Sequence[str],
    me: LeaseRecord,
    *,
    pid_alive: Callable[[int], bool],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, tuple[LeaseRecord, str, float]]:
    """Take one of the slot leases at ``keys`` (slot k's at ``keys[k]``) for ``me``, as
    sharedsub.core.ownership.members decides: (the slot, (the record written, its tag,
    ``clock()`` when the winning request was sent)).

    Raises:
        DataDirInUse: every slot is held by a live front end (the first one is named).
        StoreFailure: the store did not answer.
    """
    first: dict[int, tuple[str, float]] = {}  # per slot: the first tag seen, and when
    told = False
    while True:
        slots: list[Seen | None] = []
        for k, key in enumerate(keys):
            found = read_lease(store, key)
            if found is None:
                first.pop(k, None)
                slots.append(None)
                continue
            record, etag = found
            first_tag, first_at = first.setdefault(k, (etag, clock()))
            alive = pid_alive(record.pid) if record.host == me.host else None
            slots.append(Seen(record, etag, clock() - first_at, etag != first_tag, alive))
        match decide_slot(slots):
            case TakeSlot(slot=slot, how=Create(epoch=epoch)):
                mine = dataclasses.replace(me, epoch=epoch, renewals=0, released=False)
                sent = clock()
                try:
                    return slot, (mine, create_lease(store, keys[slot], mine), sent)
                except PreconditionFailed:
                    first.pop(slot, None)  # someone created it first: watch theirs
            case TakeSlot(slot=slot, how=TakeOver(epoch=epoch, etag=etag, reason=reason)):
                mine = dataclasses.replace(me, epoch=epoch, renewals=0, released=False)
                sent = clock()
                try:
                    new_tag = replace_lease(store, keys[slot], mine, etag)
                except PreconditionFailed:
                    first.pop(slot, None)  # someone else took it first: watch theirs
                    continue
                log.info("took the lease %s over (epoch %d): %s", keys[slot], epoch, reason)
                return slot, (mine, new_tag, sent)
            case Full(holders=holders):
                holder = holders[0][1]
                raise DataDirInUse(store.root, holder.pid, holder.amqp, host=holder.host)
            case WatchSlots(wait_s=wait):
                if not told:
                    held = [seen.record for seen in slots if seen is not None]
                    log.warning(
                        "data dir %s: %s held by %s; watching for up to %.0f s whether %s renewed",
                        store.root,
                        "its lease is" if len(keys) == 1 else f"all {len(keys)} member slots are",
                        ", ".join(f"{r.amqp or 'a front end'} (pid {r.pid} on {r.host})" for r in held),
                        max(r.ttl_s for r in held),
                        "it is" if len(held) == 1 else "they are",
                    )
                    told = True
                sleep(wait)


class LeaseHolder:
    """Renews a lease taken by :func:`take_lease` on its own thread (module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        taken: tuple[LeaseRecord, str, float],
        on_lost: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._key = store, key
        self._record, self._etag, self._sent = taken
        self._on_lost = on_lost
        self._clock = clock
        self._stop = threading.Event()
        self._lost: str | None = None
        self._losing = threading.Lock()  # the renewal and the watch threads may both find it lost
        self._announced: tuple[str | None, str | None] | None = None
        self._thread = threading.Thread(target=self._run, name="sharedsub-lease", daemon=True)
        self._watch_thread = threading.Thread(target=self._watch, name="sharedsub-lease-watch", daemon=True)

    @property
    def epoch(self) -> int:
        """The epoch this holder's writes carry."""
        return self._record.epoch

    @property
    def lost(self) -> str | None:
        """Why the lease was lost, or None while it is held."""
        return self._lost

    def announce(self, amqp: str | None, http: str | None) -> None:
        """Record where this front end serves, written with the next renewal (a refused second
        front end names it). Any thread."""
        self._announced = (amqp, http)

    def start(self) -> LeaseHolder:
        """Start renewing (and watching the renewal deadline)."""
        self._thread.start()
        self._watch_thread.start()
        return self

    def renew_once(self) -> None:
        """One renewal and its decision (the thread's step; tests call it directly)."""
        if self._lost is not None:
            return
        rec = self._record
        nxt = dataclasses.replace(rec, renewals=rec.renewals + 1)
        if self._announced is not None:
            nxt = dataclasses.replace(nxt, amqp=self._announced[0], http=self._announced[1])
        sent = self._clock()
        result: RenewalResult
        try:
            self._etag = replace_lease(self._store, self._key, nxt, self._etag)
            self._record, self._sent, result = nxt, sent, "renewed"
        except PreconditionFailed:
            result = self._read_back(nxt, sent)
        except StoreFailure as exc:
            log.warning("renewing the lease %s failed: %s", self._key, exc)
            result = "unanswered"
        decision = decide_renewal(
            result, since_renewed_s=self._clock() - self._sent, ttl_s=rec.ttl_s, renew_s=rec.renew_s
        )
        if isinstance(decision, Lost):
            self._lose(decision.reason)

    def lapsed(self) -> str | None:
        """Why this holder may no longer own what it leased, or None: lost, or not renewed for
        ``ttl_s - renew_s`` (a taker may take it ``renew_s`` later). A clock read, no request:
        writers ask before each write (any thread), so a process that wakes from a pause longer
        than that writes nothing before the watch thread stops it."""
        if self._lost is not None:
            return self._lost
        rec = self._record
        decision = decide_renewal(
            "unanswered", since_renewed_s=self._clock() - self._sent, ttl_s=rec.ttl_s, renew_s=rec.renew_s
        )
        return decision.reason if isinstance(decision, Lost) else None

    def check_deadline(self) -> None:
        """The watch thread's step (tests call it directly): lost once ``ttl_s - renew_s`` passed
        since the last renewal was sent, whether or not a renewal request is still waiting."""
        rec = self._record
        decision = decide_renewal(
            "unanswered", since_renewed_s=self._clock() - self._sent, ttl_s=rec.ttl_s, renew_s=rec.renew_s
        )
        if isinstance(decision, Lost):
            self._lose(decision.reason)

    def _lose(self, reason: str) -> None:
        """Record the loss and report it, once."""
        with self._losing:
            if self._lost is not None:
                return
            self._lost = reason
        self._stop.set()
        log.error("lost the lease %s (epoch %d): %s; stopping", self._key, self._record.epoch, reason)
        self._on_lost(reason)

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self._record.renew_s / 3)):
            self.check_deadline()

    def _read_back(self, written: LeaseRecord, sent: float) -> RenewalResult:
        """A refused renewal: "renewed" when the lease still names this holder with a renewal
        count it wrote (an earlier answer was lost); else "refused" (or "unanswered")."""
        try:
            found = read_lease(self._store, self._key)
        except (StoreFailure, ValueError):
            return "unanswered"
        if found is None:
            return "refused"
        record, etag = found
        if record.holder == written.holder and record.epoch == written.epoch and not record.released:
            self._record, self._etag = record, etag
            if record.renewals == written.renewals:
                self._sent = sent
            return "renewed"
        return "refused"

    def _run(self) -> None:
        while not self._stop.wait(self._record.renew_s):
            self.renew_once()

    def release(self) -> None:
        """Stop renewing and mark the lease released (a clean stop); a failure is logged: the
        next front end then waits out the TTL instead."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._watch_thread.is_alive():
            self._watch_thread.join()
        if self._lost is not None:
            return
        try:
            replace_lease(self._store, self._key, dataclasses.replace(self._record, released=True), self._etag)
        except (PreconditionFailed, StoreFailure) as exc:
            log.warning("could not release the lease %s: %s", self._key, exc)
