"""What ``sharedsub cluster status`` shows: the members of a data dir, the fan-out's lease, and
each topic's partitions, read from the store (no running service is asked).

On object storage the members are the slot leases ``_cluster/members/<k>`` (one LIST, then a GET
per slot; sharedsub.core.ownership.members) and the fan-out job is the holder of
``_cluster/fanout``. A local data dir has one member, the service its ``_service.json`` names
(slot 0; its ``flock`` is the lease). Never shows a secret: lease objects hold none, and the
admin token of ``_service.json`` is left out.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable

from sharedsub.core import layout
from sharedsub.core.ownership.lease import LeaseRecord
from sharedsub.core.ownership.members import member_state
from sharedsub.runtime.discovery import pid_alive, running_service
from sharedsub.storage.cluster.lease_objects import read_lease
from sharedsub.storage.cluster.owner_records import OwnerRecord
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.store import ObjectNotFound, ObjectStore
from sharedsub.storage.topics import list_topic_partitions


@dataclasses.dataclass(frozen=True, slots=True)
class Member:
    """One slot's holder (or the fan-out job's), as read."""

    slot: int | None  # None: the fan-out's lease
    state: str  # live, stale, gone, released (member_state); "running" for a local dir's service
    epoch: int | None
    host: str | None
    pid: int | None
    amqp: str | None
    http: str | None
    written_s_ago: float | None  # since the lease object was last written, by the store's clock

    def to_json(self) -> dict[str, object]:
        """The ``--json`` form."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Dispatch:
    """Who dispatches one topic partition of a subscription generation (several members)."""

    subscription: str  # its key
    generation: int
    partition: int
    owner: int | None  # the member slot; None: released (the next member with consumers takes it)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` form."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterStatus:
    """The data dir's members, its fan-out, its topics' partitions and who dispatches them."""

    data_dir: str
    members: list[Member]
    fanout: Member | None
    topics: dict[str, list[int]]
    dispatch: list[Dispatch] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The ``--json`` form."""
        return {
            "data_dir": self.data_dir,
            "members": [m.to_json() for m in self.members],
            "fanout": self.fanout.to_json() if self.fanout is not None else None,
            "topics": [{"topic": t, "partitions": p} for t, p in self.topics.items()],
            "dispatch": [d.to_json() for d in self.dispatch],
        }


def cluster_status(
    root: str,
    *,
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    alive: Callable[[int], bool] = pid_alive,
    dispatch: Callable[[str], list[Dispatch]] | None = None,
) -> ClusterStatus:
    """Read the status of the data dir ``root``; ``dispatch(root)`` reads the dispatch records
    (default :func:`read_dispatch`: all of them).

    Raises:
        StoreFailure: the store did not answer.
    """
    topics = list_topic_partitions(root)
    if layout.local_path(root) is not None:
        info = running_service(root)
        members = []
        if info is not None:
            http = info.admin_url
            members.append(Member(0, "running", None, socket.gethostname(), info.pid, info.amqp_url, http, None))
        return ClusterStatus(root, members, None, topics)
    store, fanout_key = locate(layout.join(root, layout.FANOUT_LEASE))
    members = read_members(root, now_ms=now_ms, alive=alive)
    records = (dispatch or read_dispatch)(root)
    return ClusterStatus(root, members, read_member(store, fanout_key, None, now_ms(), alive), topics, records)


def read_dispatch(root: str, limit: int | None = None) -> list[Dispatch]:
    """The dispatch owner records of the data dir ``root`` on object storage (one LIST, a GET
    each), by subscription, generation and partition; with ``limit``, the first ``limit`` records
    in key order only (at most that many GETs).

    Raises:
        StoreFailure: the store did not answer.
    """
    store, base = locate(layout.join(root, layout.DISPATCH_DIR))
    found: list[Dispatch] = []
    for meta in store.list(base + "/"):
        if limit is not None and len(found) >= limit:
            break
        parts = meta.key[len(base) + 1 :].split("/")
        if len(parts) != 3 or not parts[1].startswith("g") or not parts[2].startswith("p"):
            continue
        try:
            record = OwnerRecord.from_json(store.get(meta.key).data)
            generation, partition = int(parts[1][1:]), int(parts[2][1:])
        except (ObjectNotFound, ValueError):
            continue
        found.append(Dispatch(parts[0], generation, partition, None if record.released else record.slot))
    return sorted(found, key=lambda d: (d.subscription, d.generation, d.partition))


def read_members(
    root: str, *, now_ms: Callable[[], int] = lambda: int(time.time() * 1000), alive: Callable[[int], bool] = pid_alive
) -> list[Member]:
    """The member slots' holders of the data dir ``root`` on object storage, in slot order (one
    LIST, a GET and a HEAD per slot).

    Raises:
        StoreFailure: the store did not answer.
    """
    store, members_key = locate(layout.join(root, layout.MEMBERS_DIR))
    slots = sorted(
        {int(k) for k in (meta.key[len(members_key) + 1 :] for meta in store.list(members_key + "/")) if k.isdigit()}
    )
    return [m for m in (read_member(store, f"{members_key}/{k}", k, now_ms(), alive) for k in slots) if m is not None]


def read_member(store: ObjectStore, key: str, slot: int | None, now: int, alive: Callable[[int], bool]) -> Member | None:
    """The holder of the lease at ``key`` (member slot ``slot``; None: the fan-out's) as one
    reading shows it (a GET and a HEAD; ``now``: ms since the epoch, for the lease's age by the
    store's clock); None when there is no lease there, or not a lease record."""
    try:
        found = read_lease(store, key)
        meta = store.head(key)
    except (ObjectNotFound, ValueError):
        return None  # gone meanwhile, or not a lease record
    if found is None:
        return None
    record: LeaseRecord = found[0]
    age = max(0.0, (now - meta.modified_ms) / 1000)
    holder_alive = alive(record.pid) if record.host == socket.gethostname() else None
    state = member_state(record, age_s=age, holder_alive=holder_alive)
    return Member(slot, state, record.epoch, record.host, record.pid, record.amqp, record.http, round(age, 1))
