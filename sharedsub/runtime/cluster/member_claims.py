"""Names only one member of a data dir may hold at a time (docs/design.md §8).

Two rules of seed 000 hold across the members the way one front end holds them in memory:

* one connection per JMS ClientID: a Qpid JMS connection with an explicit ClientID asks for
  ``sole-connection-for-container`` (docs/wire.md §1.2);
* at most one consumer of an unshared durable subscription.

With several members each one **claims** the name (kind ``containers``: the container id; kind
``subscriptions``: the subscription key) by a create-only object ``_cluster/<kind>/<hex of the
name>`` (sharedsub.core.layout.claim_key) = ``{slot, token}`` before it opens the connection or
attaches the consumer, and deletes it when that ends. A claim is void once its member's slot
carries another token, is released, or belongs to a process of this host that is gone, or its
lease was not written for a whole TTL by the store's clock (a member that died elsewhere): then
the next claimant replaces it with a put on its tag. A store that does not answer refuses the
claim (the rule cannot be checked; the client tries again).

The requests (sharedsub.storage.cluster.claim_objects) run on a thread of their own; the caller
gets the answer through its callback (the front end moves it to its reactor thread). This module
decides; the objects' bodies and requests are the storage module's.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Literal

from sharedsub.core import layout
from sharedsub.core.ownership.members import fence_token
from sharedsub.runtime.cluster.cluster_status import read_member
from sharedsub.storage.cluster.claim_objects import Claim, create_claim, read_claim, release_claim, replace_claim
from sharedsub.storage.objects.store import AlreadyExists, ObjectStore, PreconditionFailed, StoreFailure

log = logging.getLogger(__name__)

ClaimKind = Literal["containers", "subscriptions"]


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """A claim refused: ``slot`` holds the name (-1: members kept claiming it meanwhile), or
    ``error`` says why the store could not tell."""

    slot: int = -1
    error: str | None = None

    def describe(self, what: str, held: str = "is held by") -> str:
        """Why ``what`` (e.g. ``container-id 'c1'``) cannot be had here: ``"<what> <held>
        another member (slot 1)"`` when a member holds it."""
        if self.error is not None:
            return f"{what} could not be checked across the cluster's members: {self.error}"
        if self.slot < 0:
            return f"{what} is being claimed by another member"
        return f"{what} {held} another member (slot {self.slot})"


class MemberClaims:
    """Claims of one ``kind`` of name for this member (module docstring)."""

    def __init__(
        self, store: ObjectStore, kind: ClaimKind, *, slot: int, token: int, pid_alive: Callable[[int], bool]
    ) -> None:
        """``store``: the data dir's, keys relative to it; ``slot``/``token``: this member's."""
        self._store = store
        self._kind: ClaimKind = kind
        self._slot, self._token = slot, token
        self._pid_alive = pid_alive
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"sharedsub-claims-{kind}")

    def claim(self, name: str, done: Callable[[Held | None], None]) -> None:
        """Claim ``name``; ``done(None)`` when this member has it, ``done(Held)`` when not
        (called on the claims thread)."""

        def run() -> None:
            try:
                done(self.claim_now(name))
            except Exception as exc:  # noqa: BLE001 (a store that does not answer: refused, said why)
                log.warning("could not check %s %r across the members: %s", self._kind, name, exc)
                done(Held(error=str(exc)))

        self._pool.submit(run)

    def release(self, name: str) -> None:
        """Give ``name`` up; a failure leaves a claim the next claimant finds void once this
        member is gone, or that this member takes back."""

        def run() -> None:
            try:
                release_claim(self._store, layout.claim_key(self._kind, name), self._token)
            except StoreFailure as exc:
                log.warning("could not release %s %r: %s", self._kind, name, exc)

        self._pool.submit(run)

    def stop(self) -> None:
        """Finish what is queued."""
        self._pool.shutdown(wait=True)

    def claim_now(self, name: str) -> Held | None:
        """The claim itself (the claims thread; tests call it): None when this member has
        ``name`` now, else who holds it.

        Raises:
            StoreFailure: the store did not answer.
        """
        key = layout.claim_key(self._kind, name)
        mine = Claim(self._slot, self._token)
        for _ in range(3):
            try:
                create_claim(self._store, key, mine)
                return None
            except AlreadyExists:
                pass
            got = read_claim(self._store, key)
            if got is None:
                continue  # released meanwhile: claim again
            held, etag = got  # an object that is not a claim reads as slot -1, token -1: void
            if held.token == self._token:
                return None  # this member's own (a connection or link it just lost, not released yet)
            if not self._void(held.slot, held.token):
                return Held(held.slot)
            try:
                replace_claim(self._store, key, mine, etag)
                return None
            except PreconditionFailed:
                continue  # someone else claimed or released it meanwhile
        return Held()

    def _void(self, slot: int, token: int) -> bool:
        """Whether a claim made under ``slot``'s fence ``token`` no longer holds (module docstring)."""
        now = int(time.time() * 1000)
        holder = read_member(self._store, layout.member_lease(slot), slot, now, self._pid_alive) if slot >= 0 else None
        return holder is None or holder.epoch is None or fence_token(slot, holder.epoch) != token or holder.state != "live"
