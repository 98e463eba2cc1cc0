"""Who owns a data dir: the one ``serve``/``frontend`` process of a local dir (``flock``), a
member slot's lease on object storage, and the fan-out job's lease (:class:`DataDirLock`,
:func:`own_data_dir`, :func:`own_fanout`).

The lease objects and their renewal are sharedsub.runtime.cluster.member_lease's; the rules
sharedsub.core.ownership.lease's and sharedsub.core.ownership.members'. A local dir's service
file (read to name the process that holds the dir) and :func:`pid_alive` stay in
sharedsub.runtime.discovery, which this module uses.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable

from sharedsub.core import layout
from sharedsub.core.errors import DataDirInUse
from sharedsub.core.ownership.lease import DEFAULT_RENEW_S, DEFAULT_TTL_S, LeaseRecord
from sharedsub.core.ownership.members import fence_token
from sharedsub.runtime.cluster.member_lease import LeaseHolder, take_lease, take_slot
from sharedsub.runtime.discovery import pid_alive, read_service_file
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.store import ObjectStore


class DataDirLock:
    """Exclusive ownership of a data dir by one ``serve``/``frontend`` process.

    A local dir: an advisory ``flock`` on ``<data>/_owner.lock``, held for the life of the
    process: the kernel releases it when the process ends however it ends (a SIGKILLed service
    never blocks its restart), and a second service on the same dir is refused at start instead
    of writing the same seqs beside the first.

    A data dir on object storage: the owner lease object (sharedsub.core.ownership.lease),
    renewed on its own thread; when it is lost, :meth:`when_lost`'s callback stops the service.
    """

    def __init__(
        self, fd: int | None, lease: Callable[[Callable[[str], None]], LeaseHolder] | None = None, *, slot: int = 0
    ) -> None:
        """``fd``: the flocked file of a local dir; ``lease``: for object storage, makes the
        started :class:`LeaseHolder` given the callback it reports a loss to; ``slot``: the
        member slot the lease is of (the topic partition this front end writes)."""
        self._fd = fd
        self.slot = slot
        self._on_lost: Callable[[str], None] = lambda _reason: None
        self._lease = lease(self._lost) if lease is not None else None

    @classmethod
    def leased(cls, store: ObjectStore, key: str, taken: tuple[LeaseRecord, str, float], slot: int = 0) -> DataDirLock:
        """Ownership by the lease ``taken`` (sharedsub.runtime.cluster.member_lease.take_lease), renewed from now."""
        return cls(None, lambda on_lost: LeaseHolder(store, key, taken, on_lost).start(), slot=slot)

    @property
    def epoch(self) -> int | None:
        """What this holder's commits carry as their owner epoch: the lease's epoch as a fence
        token of its slot (sharedsub.core.ownership.members.fence_token; the epoch itself for
        slot 0); None for a local dir."""
        return fence_token(self.slot, self._lease.epoch) if self._lease is not None else None

    def announce(self, amqp: str | None, http: str | None) -> None:
        """Where this front end serves: recorded in the lease (object storage; no-op locally,
        where ``_service.json`` says it)."""
        if self._lease is not None:
            self._lease.announce(amqp, http)

    def lapsed(self) -> str | None:
        """Why the lease may be another's by now (LeaseHolder.lapsed); None while it is held,
        and always for a local dir (its flock is the process's until it ends)."""
        return self._lease.lapsed() if self._lease is not None else None

    def when_lost(self, on_lost: Callable[[str], None]) -> None:
        """Call ``on_lost(reason)`` (once, from the lease's thread) if the lease is lost."""
        self._on_lost = on_lost

    def _lost(self, reason: str) -> None:
        self._on_lost(reason)

    def release(self) -> None:
        """Give the dir up (also done by the process ending, for a local dir)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None


def _me(ttl_s: float, renew_s: float) -> LeaseRecord:
    """This process's lease record (its epoch is decided when it takes one)."""
    return LeaseRecord(
        f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}", 0, socket.gethostname(), os.getpid(),
        ttl_s, renew_s,
    )


def _leased(root: str, lease_rel: str, ttl_s: float, renew_s: float) -> DataDirLock:
    store, key = locate(layout.join(root, lease_rel))
    return DataDirLock.leased(store, key, take_lease(store, key, _me(ttl_s, renew_s), pid_alive=pid_alive))


def _member(root: str, max_members: int, ttl_s: float, renew_s: float) -> DataDirLock:
    """A member slot of the data dir on object storage (sharedsub.core.ownership.members)."""
    store, prefix = locate(layout.join(root, layout.MEMBERS_DIR))
    keys = [f"{prefix}/{k}" for k in range(max_members)]
    slot, taken = take_slot(store, keys, _me(ttl_s, renew_s), pid_alive=pid_alive)
    return DataDirLock.leased(store, keys[slot], taken, slot)


def own_fanout(root: str, *, ttl_s: float = DEFAULT_TTL_S, renew_s: float = DEFAULT_RENEW_S) -> DataDirLock | None:
    """Take the fan-out's lease of a data dir on object storage (``_cluster/fanout``: one fan-out
    job writes its subscription tables, wherever it runs); None for a local dir, whose fan-out
    runs beside its one front end.

    Raises:
        DataDirInUse: another live fan-out job holds it (its pid and host).
        StoreFailure: the store did not answer.
    """
    if layout.local_path(root) is not None:
        return None
    return _leased(root, layout.FANOUT_LEASE, ttl_s, renew_s)


def own_data_dir(
    root: str, *, ttl_s: float = DEFAULT_TTL_S, renew_s: float = DEFAULT_RENEW_S, max_members: int = 1
) -> DataDirLock:
    """Take the data dir for this process: a ``flock`` on a local dir, a member slot's lease on
    object storage, one of ``max_members`` (``ttl_s``/``renew_s``: the lease's, see
    sharedsub.core.ownership.lease; with one slot, a second front end is refused as on a
    local dir).

    Raises:
        DataDirInUse: another live process holds it; the message names its pid and address
            (as its ``_service.json`` records them for a local dir, as its lease does on a store).
        StoreFailure: the store did not answer.
    """
    import fcntl

    path = layout.local_path(layout.service_file(root))
    if path is None:
        return _member(root, max_members, ttl_s, renew_s)
    # Read-only: flock needs no write access, and a file held open for writing would keep the
    # file system from being remounted read-only under a running service.
    fd = os.open(os.path.join(os.path.dirname(path), "_owner.lock"), os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a lock file left by an older version may have another mode
    except OSError:
        pass  # not ours to change (someone else's file): the lock still works
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        info = read_service_file(root)
        alive = info is not None and pid_alive(info.pid)
        address = info.amqp_url if alive and info is not None else None
        raise DataDirInUse(root, info.pid if alive and info is not None else None, address) from None
    return DataDirLock(fd)
