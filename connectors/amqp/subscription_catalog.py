"""The subscription catalog as the front end holds it in memory, and its writes through the committer.

The front end is the catalog's only writer (with several members, each writes its own and takes
in the others': :meth:`SubscriptionCatalog.merge`), so the current records are held here and
attach decisions take no I/O. While a catalog write for a key is in flight the key is **busy**:
what must decide on it waits (:meth:`SubscriptionCatalog.wait`) and runs once the write is done,
instead of deciding on stale state. A new subscription's record is saved with
``assign_start=True`` (the committer fills in its exact ``start_seq``); every revision goes
through the committer (sharedsub.runtime.commit_requests ``SaveSubscription``), as do the link
events of consumer links (``LinkEvent``). The catalog table itself is sharedsub/storage/catalog.py.

Reactor thread only, but for :meth:`SubscriptionCatalog.durable_tables` (the tailer's thread)
and reads of :attr:`SubscriptionCatalog.records` that copy it in one step (any thread).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Callable

from connectors.amqp.tokens import Continuation, Tokens
from sharedsub.core.model import SubscriptionRecord, SubscriptionState
from sharedsub.core.subscriptions.attach import Create, NewGeneration
from sharedsub.runtime.commit_requests import LinkEvent, LinkRow, SaveSubscription
from sharedsub.runtime.committer import Committer
from sharedsub.storage.catalog import attached_links, load_catalog

log = logging.getLogger(__name__)


class SubscriptionCatalog:
    """The current subscription records, generations and busy keys (module docstring)."""

    def __init__(
        self,
        root: str,
        committer: Committer,
        continuations: Tokens[Continuation],
        consumers: Callable[[str], int],
        *,
        shared: bool,
    ) -> None:
        """``root``: the data dir; ``continuations``: the front end's registry of what a
        committer request leaves behind (connectors/amqp/tokens.py); ``consumers(key)``: the
        consumer links of ``key`` attached here (the dispatcher's count); ``shared``: several
        members share the data dir (docs/design.md §8)."""
        self._root = root
        self._committer = committer
        self._continuations = continuations  # never travel to other threads: tokens do
        self._consumers = consumers
        self._shared = shared
        self.records: dict[str, SubscriptionRecord] = {}
        """The active records by key."""
        # Highest generation ever used per key, deleted ones included: a re-created subscription
        # gets a new table, so nothing of a deleted one's backlog comes back (ARTEMIS-177).
        self._generations: dict[str, int] = {}
        self._busy: dict[str, list[Callable[[], None]]] = {}

    def durable_tables(self) -> list[tuple[str, str]]:
        """``(table, topic)`` of the active durable subscriptions, newest first: what the tailer
        keeps warm (Tailer.keep_warm calls this on its thread; ``list()`` copies the records in one
        step of the interpreter, so the reactor changing them meanwhile does no harm)."""
        records = list(self.records.values())
        return [(r.table, r.topic) for r in reversed(records) if r.identity.durable and r.active]

    def load(self) -> None:
        """Read the catalog (start-up). Non-durable subscriptions do not survive a restart of
        the one front end of a data dir; with several members they may be another's, and stay."""
        stale = []
        for rec in load_catalog(self._root).values():
            self._generations[rec.key] = max(self._generations.get(rec.key, 0), rec.generation)
            if not rec.active:
                continue
            if rec.identity.durable or self._shared:
                self.records[rec.key] = rec
            else:
                stale.append(rec)
        for rec in stale:  # left behind by a crash: their consumers are gone
            self.save(dataclasses.replace(rec, state=SubscriptionState.DELETED), lambda _r: None)
        if self._shared:
            return  # links recorded as attached may be other members' (they are alive)
        # Links recorded as attached belonged to the previous run of this front end.
        for (key, name, container, connection), row in attached_links(self._root).items():
            self.link_event(key, row["generation"], name, container, connection, "detached")

    def merge(self, records: list[SubscriptionRecord]) -> None:
        """Catalog records committed by other members (several members share the data dir:
        docs/design.md §8), newer than what this front end knows: attach decisions and
        null-source lookups see them from now on. A subscription with consumers here, or with a
        catalog write of this front end in flight, keeps its local record unless the newer one
        is of the same generation (this front end's consumers decide for it)."""
        for rec in records:
            self._generations[rec.key] = max(self._generations.get(rec.key, 0), rec.generation)
            cur = self.records.get(rec.key)
            if (cur is not None and rec.revision <= cur.revision) or rec.key in self._busy:
                continue
            if self._consumers(rec.key) > 0 and (cur is None or cur.table != rec.table or not rec.active):
                log.warning(
                    "subscription %s changed on another member (generation %d, %s) while consumers are attached here",
                    rec.key, rec.generation, rec.state,
                )
                continue
            if rec.active:
                self.records[rec.key] = rec
            else:
                self.records.pop(rec.key, None)

    def current(self, rec: SubscriptionRecord) -> SubscriptionRecord | None:
        """The current record of ``rec``'s generation; None when it is gone (deleted, or
        replaced by another generation)."""
        current = self.records.get(rec.key)
        return current if current is not None and current.table == rec.table else None

    def new_record(
        self, decision: Create | NewGeneration, previous: SubscriptionRecord | None, user: str | None
    ) -> SubscriptionRecord:
        """The record of a new subscription, or of the next generation of ``previous``.

        The generation number is one above any this key ever had, deleted ones included; the
        committer fills in ``start_seq`` and ``revision``. The owner is the previous
        generation's, or ``user`` for a new subscription (or one that had none).
        """
        identity = previous.identity if previous is not None else decision.identity  # type: ignore[union-attr]
        used = max(previous.generation if previous is not None else 0, self._generations.get(identity.key, 0))
        now = dt.datetime.now(dt.UTC)
        return SubscriptionRecord(
            identity=identity,
            generation=used + 1,
            state=SubscriptionState.ACTIVE,
            topic=decision.topic,
            binding=decision.binding,
            selector=decision.selector,
            no_local=decision.no_local,
            expiry_policy=decision.expiry_policy,
            start_seq=0,
            source=decision.stored_source,
            created_at=previous.created_at if previous is not None else now,
            updated_at=now,
            owner=previous.owner if previous is not None and previous.owner is not None else user,
        )

    # ------------------------------------------------------------------ busy keys

    def busy(self, key: str) -> bool:
        """True while a catalog write for ``key`` is in flight (its state is about to change)."""
        return key in self._busy

    def wait(self, key: str, then: Callable[[], None]) -> None:
        """Run ``then()`` once the catalog write in flight for ``key`` is done (``key`` is busy)."""
        self._busy[key].append(then)

    def begin_write(self, rec: SubscriptionRecord) -> None:
        """``rec`` (a new subscription or generation) is about to be saved: its key is busy
        until :meth:`end_write` or :meth:`moved`, and its generation is used."""
        self._busy[rec.key] = []
        self._generations[rec.key] = max(self._generations.get(rec.key, 0), rec.generation)

    def save_new(self, rec: SubscriptionRecord, then: Continuation) -> None:
        """Save ``rec`` with its ``start_seq`` assigned by the committer; ``then(result)`` on the
        reactor thread once it is committed (or failed)."""
        self._committer.submit(SaveSubscription(rec, assign_start=True, token=self._continuations.put(then)))

    def stored(self, rec: SubscriptionRecord) -> None:
        """``rec`` is committed: it is its key's current record (the write stays in flight until
        :meth:`end_write`)."""
        self.records[rec.key] = rec

    def end_write(self, key: str) -> None:
        """The write for ``key`` is done: run what waited for it."""
        for cont in self._busy.pop(key, []):
            cont()

    def moved(self, key: str, record: SubscriptionRecord) -> None:
        """The write for ``key`` was refused: another member committed ``record`` first (its
        record had not reached this one). Take it in, then run what waited."""
        waiting = self._busy.pop(key, [])
        self.merge([record])
        for cont in waiting:
            cont()

    # ------------------------------------------------------------------ other writes

    def remove(self, rec: SubscriptionRecord, then: Continuation) -> None:
        """Forget ``rec`` and save its DELETED revision; ``then(result)`` once it is committed."""
        self.records.pop(rec.key, None)
        self.save(dataclasses.replace(rec, state=SubscriptionState.DELETED), then)

    def save(self, rec: SubscriptionRecord, then: Continuation) -> None:
        """Save the revision ``rec`` as it is; ``then(result)`` once it is committed."""
        self._committer.submit(SaveSubscription(rec, assign_start=False, token=self._continuations.put(then)))

    def link_event(self, key: str, generation: int, name: str, container: str, connection: str, event: str) -> None:
        """Record a consumer link's ``event`` (``attached``, ``detached``) in the link log."""
        row = LinkRow(key=key, generation=generation, link=name, container=container, connection=connection, event=event)
        self._committer.submit(LinkEvent(row))
