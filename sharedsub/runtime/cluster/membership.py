"""The cluster part of a front end: everything a member runs beside its peers (docs/design.md §8),
built once with the front end's other parts (connectors/amqp/parts.py) and reached by it through
one typed port (connectors/amqp/cluster_port.py).

On object storage a member advertises the others to its clients (:class:`MemberView`: each open
frame's ``failover-server-list``). With several members allowed (``[cluster] max_members`` > 1) it
also claims names only one member may hold (a JMS ClientID's one connection, an unshared durable
subscription's one consumer: :class:`MemberClaims`), asks the store what the other members hold
before attach and detach decisions (:class:`PeerConsumers`), and runs the thread that shares the
dispatch of each subscription's partitions (:class:`PartitionOwners`). A local data dir has one
member and none of them: :meth:`Membership.alone`.

Threads: each of those runs its store reads on a thread of its own; an answer the front end waits
for comes back through ``post`` (the engine loop's injector: it runs there), with the plain values
the request carried: never a proton object (connectors/amqp/wire/reactor_thread.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from sharedsub.core.config import Settings, on_object_store, several_members
from sharedsub.runtime.cluster.member_claims import ClaimKind, Held, MemberClaims
from sharedsub.runtime.cluster.member_view import MemberView
from sharedsub.runtime.cluster.partition_owners import LocalSubscriptions, PartitionOwners
from sharedsub.runtime.cluster.peer_consumers import PeerConsumers, Seen
from sharedsub.runtime.discovery import pid_alive
from sharedsub.storage.objects import open_store

Post = Callable[[Callable[[], None]], None]
"""``post(fn)``: run ``fn()`` on the front end's thread (any thread may call it)."""


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSlot:
    """Which member this front end is: its slot and the fence token its lease gave it."""

    slot: int
    token: int


@dataclasses.dataclass(frozen=True, slots=True)
class MemberStatus:
    """This member as /health shows it: its slot, and the subscriptions whose consumers here get
    no partition (more members have consumers of them than their topic has partitions)."""

    slot: int
    idle_consumers: list[str]


class Membership:
    """The cluster services of one front end (module docstring); every query is safe from any
    thread, every answer to a request runs through ``post``."""

    def __init__(
        self,
        *,
        post: Post,
        view: MemberView | None = None,
        owners: PartitionOwners | None = None,
        containers: MemberClaims | None = None,
        peers: PeerConsumers | None = None,
    ) -> None:
        self._post = post
        self._view = view
        self._owners = owners
        self._containers = containers
        self._peers = peers

    @classmethod
    def alone(cls, post: Post) -> Membership:
        """The membership of a front end with no peers (a local data dir, one member)."""
        return cls(post=post)

    @property
    def several(self) -> bool:
        """Several members may share the data dir: names are claimed, decisions ask the store."""
        return self._owners is not None

    # ------------------------------------------------------------------ queries (any thread)

    def failover_peers(self) -> Sequence[tuple[str, int]]:
        """The other members' (host, port), for each open frame; empty when there are none."""
        return self._view.peers() if self._view is not None else ()

    def consumers_elsewhere(self, key: str, generation: int) -> int | None:
        """How many other live members have consumers of the generation (a store read: not on the
        front end's thread); None with one member."""
        return self._owners.consumers_elsewhere(key, generation) if self._owners is not None else None

    def status(self) -> MemberStatus | None:
        """This member for /health; None with one member."""
        if self._owners is None:
            return None
        return MemberStatus(self._owners.slot, self._owners.idle_consumers())

    # ------------------------------------------------------------------ requests (front end's thread)

    def claim_container(self, container: str, then: Callable[[Held | None], None]) -> None:
        """Claim ``container`` (a JMS ClientID) for one connection here; ``then(None)`` when this
        member has it, ``then(Held)`` when not, run through ``post``. With one member: at once."""
        if self._containers is None:
            then(None)
            return
        post = self._post
        self._containers.claim(container, lambda held: post(lambda: then(held)))

    def release_container(self, container: str) -> None:
        """Give ``container`` up (its connection ended)."""
        if self._containers is not None:
            self._containers.release(container)

    def look(self, keys: list[str], then: Callable[[Seen | None], None]) -> None:
        """``then(Seen)`` through ``post``: the catalog's latest records of ``keys`` and their
        consumers on the other live members; ``then(None)`` when the store did not answer.
        Only with several members."""
        self._require_peers().look(keys, then)

    def claim_subscription(self, key: str, then: Callable[[Held | None], None]) -> None:
        """Claim ``key`` for this member's one consumer of an unshared durable subscription:
        ``then(None)`` through ``post`` when it is this member's. Only with several members."""
        self._require_peers().claim(key, then)

    def release_subscription(self, key: str) -> None:
        """Give the claim of ``key`` up."""
        self._require_peers().release(key)

    def _require_peers(self) -> PeerConsumers:
        if self._peers is None:
            raise RuntimeError("asked the other members with one member: check Membership.several first")
        return self._peers

    # ------------------------------------------------------------------ life cycle

    def start(self, url: str) -> None:
        """Start reading the members (``url``: this front end's address, left out of what it
        advertises) and sharing dispatch; the engine loop is about to run."""
        if self._view is not None:
            self._view.start(url)
        if self._owners is not None:
            self._owners.start()

    def stop(self) -> None:
        """Stop every thread, finishing what is queued."""
        if self._view is not None:
            self._view.stop()
        if self._owners is not None:
            self._owners.stop()
        if self._containers is not None:
            self._containers.stop()
        if self._peers is not None:
            self._peers.stop()


def build_membership(settings: Settings, member: MemberSlot | None, *, local: LocalSubscriptions, post: Post) -> Membership:
    """The membership of a front end on ``settings``' data dir (nothing started): ``member``, its
    slot and fence token (None: a local data dir); ``local``: the front end's side of sharing
    dispatch; ``post``: runs an answer on the front end's thread."""
    if not on_object_store(settings):
        return Membership.alone(post)
    view = MemberView(settings.data_dir)
    if not several_members(settings) or member is None:
        return Membership(post=post, view=view)
    root = settings.data_dir
    owners = PartitionOwners(
        root,
        open_store(root),
        slot=member.slot,
        token=member.token,
        max_members=settings.cluster.max_members,
        local=local,
        interval=settings.cluster.interval,
        drain_timeout=settings.cluster.drain_timeout,
        pid_alive=pid_alive,
    )

    def claims(kind: ClaimKind) -> MemberClaims:
        return MemberClaims(open_store(root), kind, slot=member.slot, token=member.token, pid_alive=pid_alive)

    peers = PeerConsumers(root, claims("subscriptions"), owners.consumers_elsewhere, post)
    return Membership(post=post, view=view, owners=owners, containers=claims("containers"), peers=peers)
