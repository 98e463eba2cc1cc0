"""Sharing subscriptions between the members of a data dir: the thread that decides which
topic partitions of each subscription generation this member dispatches (docs/design.md §8).

Every ``interval`` seconds it reads, for each generation this member has consumers of or
dispatches partitions of: the members' leases (who is alive, under which fence token), who has
consumers (presence objects), who dispatches each partition (owner records), and the topic's
partitions; then applies sharedsub.core.ownership.partition_owners.decide for this member: it
takes a partition by a conditional put (one taker wins), and hands one over by first telling
the front end to stop sending its rows, then, once the deliveries it sent of them are settled
(or ``drain_timeout`` passed) and those settlements are stored in the ack log (which the next
owner reads), marking the record released, so the next member takes it.

A member is alive while its lease's tag keeps changing (watched on this process's monotonic
clock, as the lease rules watch: sharedsub.core.ownership.lease), it is not released, and, on
this host, its process lives. A record written under a token that is not its slot's live one
is void: the partition is taken over, and its rows not settled go out again marked possibly
delivered.

The front end is reached through :class:`LocalSubscriptions` (the service wires it to the
reactor thread). Nothing here touches AMQP. A reading that fails is logged and tried at the
next interval: what this member owns it keeps owning meanwhile (its lease, not this thread,
decides whether it may still write).
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ownership import unconsumed
from sharedsub.core.ownership.lease import LeaseRecord
from sharedsub.core.ownership.members import fence_token
from sharedsub.core.ownership.partition_owners import Action, Owner, decide, idle_members
from sharedsub.runtime.cluster.cluster_status import read_member
from sharedsub.storage.catalog import CatalogReader
from sharedsub.storage.cluster.lease_objects import read_lease
from sharedsub.storage.cluster.owner_records import OwnerRecord, read_owners, write_owner
from sharedsub.storage.cluster.presence import clear_presence, read_presence, set_presence
from sharedsub.storage.delta.tables import table_exists
from sharedsub.storage.objects.store import ObjectStore, PreconditionFailed, StoreFailure

log = logging.getLogger(__name__)

# Seconds a topic's partitions are taken as known: a member's first publish to a topic makes a
# partition, whose rows wait (routed, in the subscription tables) until a reading finds it.
PARTITIONS_INTERVAL = 2.0
# Seconds between looks for non-durable subscriptions no live member consumes
# (sharedsub.core.ownership.unconsumed), and the least time one is watched before it ends (more
# with a long interval: a consumer's member writes its presence within an interval).
UNCONSUMED_LOOK = 5.0
UNCONSUMED_GRACE = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class Generation:
    """A subscription generation as this thread knows it."""

    key: str
    generation: int
    topic: str


class LocalSubscriptions(Protocol):
    """What :class:`PartitionOwners` asks of and tells the front end (its thread does the work)."""

    def consumed(self) -> list[Generation]:
        """The generations with consumer links on this front end now."""
        ...

    def own(self, gen: Generation, partitions: frozenset[int], taken_over: frozenset[int]) -> None:
        """Dispatch exactly ``partitions`` of ``gen`` from now on; rows of ``taken_over`` (whose
        previous dispatcher died) go out marked possibly delivered."""
        ...

    def draining(self, gen: Generation, partitions: frozenset[int]) -> int:
        """Rows of ``partitions`` of ``gen`` sent here and not settled yet."""
        ...

    def catalog(self, records: list[SubscriptionRecord]) -> None:
        """Catalog records committed since the last reading (by any member)."""
        ...

    def settlements_stored(self) -> threading.Event:
        """An event set once every settlement submitted so far is stored in its ack log."""
        ...

    def end_unconsumed(self, gen: Generation) -> None:
        """End the non-durable subscription generation ``gen``: no live member has had consumers
        of it for a grace (sharedsub.core.ownership.unconsumed); nothing if it has some here now."""
        ...


@dataclasses.dataclass(slots=True)
class _Watched:
    """A member slot's lease as this thread has watched it."""

    etag: str
    since: float  # monotonic: when this tag was first seen
    record: LeaseRecord


@dataclasses.dataclass(slots=True)
class _Owned:
    """A partition this member dispatches: its record's tag, and a hand-over under way."""

    etag: str
    release_by: float | None = None  # monotonic deadline of the drain; None: not handing over
    stored: threading.Event | None = None  # set once the settlements made before the drain ended are stored


class PartitionOwners:
    """See the module docstring."""

    def __init__(
        self,
        root: str,
        store: ObjectStore,
        *,
        slot: int,
        token: int,
        max_members: int,
        local: LocalSubscriptions,
        interval: float,
        drain_timeout: float,
        pid_alive: Callable[[int], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``store``: the data dir's store, keys relative to the data dir; ``slot``/``token``:
        this member's slot and fence token (sharedsub.core.ownership.members.fence_token)."""
        self.root = root
        self._store = store
        self.slot = slot
        self.token = token
        self._max_members = max_members
        self._local = local
        self.interval = interval
        self._drain_timeout = drain_timeout
        self._pid_alive = pid_alive
        self._clock = clock
        self._host = socket.gethostname()
        self._watched: dict[int, _Watched] = {}
        self._owned: dict[Generation, dict[int, _Owned]] = {}
        self._present: set[Generation] = set()
        self._partitions: dict[str, tuple[float, list[int]]] = {}
        self._catalog = CatalogReader(root)
        self._revisions: dict[str, int] = {}  # the revision of each key last handed to the front end
        self._unconsumed: dict[Generation, float] = {}  # watched: since when no live member consumes it
        self._looked = -UNCONSUMED_LOOK  # when the last look for them was (monotonic)
        self._grace = max(UNCONSUMED_GRACE, 5 * interval)
        self.idle: dict[str, bool] = {}  # by key: its consumers here wait (no partition for them); any thread reads
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sharedsub-dispatch-owners", daemon=True)

    def start(self) -> PartitionOwners:
        """Run :meth:`step` every ``interval`` seconds on its own thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, and give up presence (owner records are left: a clean stop's released lease
        voids them, and the next member takes them at once)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for gen in list(self._present):
            try:
                clear_presence(self._store, "", gen.key, gen.generation, self.slot)
            except StoreFailure as exc:
                log.warning("could not clear the presence of %s: %s", gen.key, exc)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 (a store that does not answer, a front end stopping: the next step tries again)
                log.warning("reading who dispatches what failed (tried again in %.0f s): %s", self.interval, exc)

    # ------------------------------------------------------------------ one reading

    def step(self) -> None:
        """One reading and what it decides (the thread's step; tests call it directly)."""
        live = self._live_members()
        records = self._read_catalog()
        consumed = self._local.consumed()
        for gen in [*consumed, *[g for g in self._owned if g not in consumed]]:
            self._step_generation(gen, gen in consumed, live)
        self._look_for_unconsumed(records, consumed, live)

    def _look_for_unconsumed(
        self, records: dict[str, SubscriptionRecord], consumed: list[Generation], live: dict[int, int]
    ) -> None:
        """Every UNCONSUMED_LOOK seconds: end the non-durable subscriptions no live member has
        had consumers of for the grace (sharedsub.core.ownership.unconsumed; one reading of
        presence objects per such subscription without consumers here)."""
        now = self._clock()
        if now - self._looked < UNCONSUMED_LOOK:
            return
        self._looked = now
        here = {g.key for g in consumed}
        watched: dict[Generation, float] = {}
        for rec in records.values():
            if not unconsumed.looked_at(rec) or rec.key in here:
                continue
            gen = Generation(rec.key, rec.generation, rec.topic)
            present = read_presence(self._store, "", rec.key, rec.generation)
            someone = any(live.get(slot) == token for slot, token in present.items())
            verdict, since = unconsumed.verdict(
                rec, consumed=someone, unconsumed_since=self._unconsumed.get(gen), now=now, grace=self._grace
            )
            if verdict is unconsumed.Verdict.END:
                idle = now - (since if since is not None else now)
                log.info("ending %s gen %d: no live member has had consumers of it for %.0f s", rec.key, rec.generation, idle)
                self._local.end_unconsumed(gen)
            elif since is not None:
                watched[gen] = since
        self._unconsumed = watched

    def _step_generation(self, gen: Generation, has_consumers: bool, live: dict[int, int]) -> None:
        if has_consumers and gen not in self._present:
            set_presence(self._store, "", gen.key, gen.generation, self.slot, self.token)
            self._present.add(gen)
        elif not has_consumers and gen in self._present:
            clear_presence(self._store, "", gen.key, gen.generation, self.slot)
            self._present.discard(gen)
        present = read_presence(self._store, "", gen.key, gen.generation)
        with_consumers = sorted(s for s, token in present.items() if live.get(s) == token)
        if has_consumers and self.slot not in with_consumers:
            with_consumers.append(self.slot)
        partitions = self._topic_partitions(gen.topic)
        records = read_owners(self._store, "", gen.key, gen.generation)
        owners = {p: self._owner(rec, live) for p, (rec, _tag) in records.items() if not rec.released}
        owned = self._owned.setdefault(gen, {})
        taken_over: set[int] = set()
        for p, action in decide(self.slot, partitions, with_consumers, owners).items():
            if action is Action.TAKE:
                found = records.get(p)
                mine = OwnerRecord(self.slot, self.token)
                try:
                    tag = write_owner(self._store, "", gen.key, gen.generation, p, mine, found[1] if found else None)
                except PreconditionFailed:
                    continue  # another member took it first: the next reading says who
                owned[p] = _Owned(tag)
                if found is not None and not found[0].released:
                    taken_over.add(p)  # its dispatcher died without handing it over
                log.info(
                    "dispatching partition %d of %s gen %d%s",
                    p, gen.key, gen.generation, " (taken over)" if p in taken_over else "",
                )
            elif action is Action.KEEP:
                entry = owned.setdefault(p, _Owned(records[p][1]))
                entry.release_by = None  # (wanted here again before a hand-over finished)
            elif action is Action.RELEASE:
                owned.setdefault(p, _Owned(records[p][1]))
                self._hand_over(gen, p, owned)
        keep = frozenset(p for p, o in owned.items() if o.release_by is None)
        if has_consumers or keep:
            self._local.own(gen, keep, frozenset(taken_over))
        self.idle[gen.key] = has_consumers and self.slot in idle_members(partitions, with_consumers)
        if not owned and not has_consumers:
            self._owned.pop(gen, None)
            self.idle.pop(gen.key, None)

    def _owner(self, rec: OwnerRecord, live: dict[int, int]) -> Owner:
        """An owner record as the rules read it: alive while its slot's live token is the one it
        was written under (one of this member's earlier epochs counts as another, dead member)."""
        if rec.slot == self.slot and rec.token != self.token:
            return Owner(-1, False)
        return Owner(rec.slot, live.get(rec.slot) == rec.token)

    def _hand_over(self, gen: Generation, p: int, owned: dict[int, _Owned]) -> None:
        """Stop sending partition ``p``'s rows, then, once drained (or past the drain timeout) and
        the drain's settlements are stored, mark its record released (one step of it per reading)."""
        entry = owned[p]
        now = self._clock()
        if entry.release_by is None:
            entry.release_by = now + self._drain_timeout
            self._local.own(gen, frozenset(q for q, o in owned.items() if o.release_by is None), frozenset())
            return
        if self._local.draining(gen, frozenset({p})) and now < entry.release_by:
            return
        if entry.stored is None:
            # The settlements of the drain go to the ack log through the committer: the next
            # owner reads that log when it takes the partition, so they must be stored first
            # (else it sends again what was acknowledged here).
            entry.stored = self._local.settlements_stored()
        if not entry.stored.is_set():
            return
        released = OwnerRecord(self.slot, self.token, released=True)
        try:
            write_owner(self._store, "", gen.key, gen.generation, p, released, entry.etag)
        except PreconditionFailed:
            pass  # someone took it over meanwhile (this member was taken for dead): it is theirs
        del owned[p]
        log.info("handed partition %d of %s gen %d over", p, gen.key, gen.generation)

    # ------------------------------------------------------------------ readings

    def _read_catalog(self) -> dict[str, SubscriptionRecord]:
        """Hand the front end the catalog records committed since the last reading (the
        catalog's new commits only: one probe when there are none); every record, by key."""
        records = self._catalog.refresh()
        changed = [rec for key, rec in records.items() if self._revisions.get(key) != rec.revision]
        if changed:
            self._local.catalog(changed)
            self._revisions.update((rec.key, rec.revision) for rec in changed)
        return records

    def _live_members(self) -> dict[int, int]:
        """``{slot: fence token}`` of the members alive (module docstring)."""
        now = self._clock()
        live: dict[int, int] = {}
        for slot in range(self._max_members):
            found = read_lease(self._store, layout.member_lease(slot))
            if found is None:
                self._watched.pop(slot, None)
                continue
            record, etag = found
            seen = self._watched.get(slot)
            if seen is None or seen.etag != etag:
                seen = self._watched[slot] = _Watched(etag, now, record)
            if record.released or (record.host == self._host and not self._pid_alive(record.pid)):
                continue
            if slot != self.slot and now - seen.since >= record.ttl_s:
                continue  # not renewed for a whole TTL of watching
            live[slot] = fence_token(slot, record.epoch)
        return live

    def idle_consumers(self) -> list[str]:
        """The subscriptions whose consumers here get no partition, sorted (any thread: a copy of
        what the last reading found)."""
        return sorted(k for k, idle in self.idle.copy().items() if idle)

    def consumers_elsewhere(self, key: str, generation: int) -> int:
        """How many other live members say they have consumers of the generation (any thread:
        reads the store, not this thread's state)."""
        now = int(time.time() * 1000)
        count = 0
        for slot, token in read_presence(self._store, "", key, generation).items():
            if slot == self.slot:
                continue
            holder = read_member(self._store, layout.member_lease(slot), slot, now, self._pid_alive)
            # A lease not written for a TTL still counts: its holder may only be slow to renew.
            if holder is not None and holder.epoch is not None and fence_token(slot, holder.epoch) == token:
                count += holder.state in ("live", "stale")
        return count

    def _topic_partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` with a table: one per member slot at most, each looked for
        by a listing of its log (``max_members`` small listings, not one of every topic)."""
        now = self._clock()
        known = self._partitions.get(topic)
        if known is None or now - known[0] >= PARTITIONS_INTERVAL:
            found = [
                k for k in range(self._max_members) if table_exists(layout.topic_partition_table(self.root, topic, k))
            ]
            known = self._partitions[topic] = (now, found)
        return known[1]
