"""One connection per JMS ClientID across the members of a data dir (docs/design.md §8).

A Qpid JMS connection with an explicit ClientID asks for ``sole-connection-for-container``
(docs/wire.md §1.2), and JMS allows one connection per ClientID. One front end checks its own
connections; with several members each one also **claims** the container id by a create-only
object ``_cluster/containers/<hex of the id>`` = ``{slot, token}`` before it opens the
connection, and deletes it when the connection ends. A claim is void once its member's slot
carries another token, is released, or belongs to a process of this host that is gone, or its
lease was not written for a whole TTL by the store's clock (a member that died elsewhere): then
the next claimant replaces it with a put on its tag. A store that does not answer refuses the
connection (the rule cannot be checked; the client tries again).

The requests run on a thread of their own; the front end's thread gets the answer through its
callback (it opens or refuses the connection there).
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import time
from collections.abc import Callable

from sharedsub.core import layout
from sharedsub.core.ownership.members import fence_token
from sharedsub.runtime.cluster_status import read_member
from sharedsub.storage.objects.store import AlreadyExists, ObjectNotFound, ObjectStore, PreconditionFailed, StoreFailure

log = logging.getLogger(__name__)


def claim_key(container: str) -> str:
    """The claim object of a container id (hex: any id is a safe key)."""
    return f"_cluster/containers/{container.encode().hex()}"


class ContainerClaims:
    """Claims of container ids for this member (module docstring)."""

    def __init__(self, store: ObjectStore, *, slot: int, token: int, pid_alive: Callable[[int], bool]) -> None:
        """``store``: the data dir's, keys relative to it; ``slot``/``token``: this member's."""
        self._store = store
        self._slot, self._token = slot, token
        self._pid_alive = pid_alive
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sharedsub-claims")

    def claim(self, container: str, done: Callable[[str | None], None]) -> None:
        """Claim ``container``; ``done(None)`` when this member has it, ``done(reason)`` when
        not (called on the claims thread)."""

        def run() -> None:
            try:
                done(self.claim_now(container))
            except Exception as exc:  # noqa: BLE001 (a store that does not answer: refused, said why)
                log.warning("could not check container-id %r across the members: %s", container, exc)
                done(f"container-id {container!r} could not be checked across the cluster's members: {exc}")

        self._pool.submit(run)

    def release(self, container: str) -> None:
        """Give ``container`` up (its connection ended); a failure leaves a claim the next
        claimant finds void once this member is gone, or that this member takes back."""

        def run() -> None:
            try:
                got = self._store.get(claim_key(container))
                if json.loads(got.data).get("token") == self._token:
                    self._store.delete(claim_key(container))
            except (ObjectNotFound, ValueError):
                pass
            except StoreFailure as exc:
                log.warning("could not release container-id %r: %s", container, exc)

        self._pool.submit(run)

    def stop(self) -> None:
        """Finish what is queued."""
        self._pool.shutdown(wait=True)

    def claim_now(self, container: str) -> str | None:
        """The claim itself (the claims thread; tests call it): None when this member has
        ``container`` now, else why not.

        Raises:
            StoreFailure: the store did not answer.
        """
        key = claim_key(container)
        body = json.dumps({"slot": self._slot, "token": self._token}).encode()
        for _ in range(3):
            try:
                self._store.put_if_absent(key, body)
                return None
            except AlreadyExists:
                pass
            try:
                got = self._store.get(key)
            except ObjectNotFound:
                continue  # released meanwhile: claim again
            try:
                held = json.loads(got.data)
                slot, token = int(held["slot"]), int(held["token"])
            except (ValueError, KeyError, TypeError):
                slot, token = -1, -1  # not a claim: void
            if token == self._token:
                return None  # this member's own (a connection it just lost, not released yet)
            if not self._void(slot, token):
                return f"container-id {container!r} is already connected to another member (slot {slot})"
            try:
                self._store.put_if_match(key, body, got.meta.etag)
                return None
            except PreconditionFailed:
                continue  # someone else claimed or released it meanwhile
        return f"container-id {container!r} is being claimed by another member"

    def _void(self, slot: int, token: int) -> bool:
        """Whether a claim made under ``slot``'s fence ``token`` no longer holds (module docstring)."""
        now = int(time.time() * 1000)
        holder = read_member(self._store, layout.member_lease(slot), slot, now, self._pid_alive) if slot >= 0 else None
        return holder is None or holder.epoch is None or fence_token(slot, holder.epoch) != token or holder.state != "live"
