"""Claim objects: a name (a JMS ClientID, an unshared durable subscription) only one member of a
data dir may hold at a time, one small JSON object ``{slot, token}`` per name (the key is
sharedsub.core.layout.claim_key's; whether a claim still holds, and what to do about it, is
sharedsub.runtime.cluster.member_claims'). Each function is one or two requests; the store's
errors pass through as documented.

``token`` is the claiming member's fence token (sharedsub.core.ownership.members.fence_token).
"""

from __future__ import annotations

import dataclasses
import json

from sharedsub.storage.objects.store import ObjectNotFound, ObjectStore


@dataclasses.dataclass(frozen=True, slots=True)
class Claim:
    """Who made a claim: member ``slot`` under fence ``token`` (-1 and -1: an object that is not
    a claim, which no member holds)."""

    slot: int
    token: int

    def to_json(self) -> bytes:
        """The object's body."""
        return json.dumps({"slot": self.slot, "token": self.token}).encode()

    @staticmethod
    def from_json(data: bytes) -> Claim:
        """Read a body :meth:`to_json` wrote; anything else reads as ``Claim(-1, -1)``."""
        try:
            held = json.loads(data)
            return Claim(int(held["slot"]), int(held["token"]))
        except (ValueError, KeyError, TypeError):
            return Claim(-1, -1)


def create_claim(store: ObjectStore, key: str, claim: Claim) -> None:
    """Write the claim at ``key`` if there is none.

    Raises:
        AlreadyExists: a claim is there.
        StoreFailure: the store did not answer.
    """
    store.put_if_absent(key, claim.to_json())


def read_claim(store: ObjectStore, key: str) -> tuple[Claim, str] | None:
    """The claim at ``key`` and its tag, or None when there is none.

    Raises:
        StoreFailure: the store did not answer.
    """
    try:
        got = store.get(key)
    except ObjectNotFound:
        return None
    return Claim.from_json(got.data), got.meta.etag


def replace_claim(store: ObjectStore, key: str, claim: Claim, etag: str) -> None:
    """Write ``claim`` over the one whose tag is ``etag`` (taking over a void claim).

    Raises:
        PreconditionFailed: it changed (claimed or released by another) or is gone.
        StoreFailure: the store did not answer.
    """
    store.put_if_match(key, claim.to_json(), etag)


def release_claim(store: ObjectStore, key: str, token: int) -> None:
    """Delete the claim at ``key`` if it was made under ``token``; nothing when there is none, it
    is another's, or it is not a JSON claim.

    Raises:
        StoreFailure: the store did not answer.
    """
    try:
        got = store.get(key)
        if json.loads(got.data).get("token") == token:
            store.delete(key)
    except (ObjectNotFound, ValueError):
        pass
