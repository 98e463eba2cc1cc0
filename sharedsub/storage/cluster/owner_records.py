"""The objects by which members of a data dir on object storage share a subscription: who has
consumers of a generation, and who dispatches each of its topic partitions (the rules are
sharedsub.core.ownership.partition_owners'; the keys sharedsub.core.layout's). Each is one small
JSON object, written with the store's conditional puts, never with a lock:

* presence ``_cluster/consumers/<key>/g<gen>/<slot>``: ``{slot, token}``, put while member
  ``slot`` has consumer links of the generation, deleted after its last one goes; void once
  that slot's lease carries another token (the member died or lost its slot);
* owner ``_cluster/dispatch/<key>/g<gen>/p<k>``: ``{slot, token, released}``, created with
  put-if-absent, taken over and released with put-if-match on the tag read, so two members
  that decide to take the same partition cannot both succeed.

``token`` is the member's fence token (sharedsub.core.ownership.members.fence_token).
"""

from __future__ import annotations

import dataclasses
import json

from sharedsub.core import layout
from sharedsub.storage.objects.store import ObjectNotFound, ObjectStore


@dataclasses.dataclass(frozen=True, slots=True)
class OwnerRecord:
    """A partition's dispatch owner as recorded."""

    slot: int
    token: int
    released: bool = False

    def to_json(self) -> bytes:
        """The object's body."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @staticmethod
    def from_json(data: bytes) -> OwnerRecord:
        """Read a body :meth:`to_json` wrote.

        Raises:
            ValueError: not an owner record.
        """
        try:
            raw = json.loads(data)
            return OwnerRecord(int(raw["slot"]), int(raw["token"]), bool(raw.get("released", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a dispatch owner record: {exc}") from None


def _children(store: ObjectStore, prefix: str) -> list[str]:
    """The last path segment of every object directly under ``prefix``."""
    names = (meta.key[len(prefix) + 1 :] for meta in store.list(prefix + "/"))
    return sorted({name for name in names if "/" not in name})


def read_owners(store: ObjectStore, base: str, key: str, generation: int) -> dict[int, tuple[OwnerRecord, str]]:
    """``{partition: (record, tag)}`` of a generation's owner records (one LIST, a GET each);
    ``base``: the data dir's key in ``store`` (sharedsub.storage.objects.locations.locate)."""
    prefix = _join(base, layout.dispatch_owners_dir(key, generation))
    found: dict[int, tuple[OwnerRecord, str]] = {}
    for name in _children(store, prefix):
        if not (name.startswith("p") and name[1:].isdigit()):
            continue
        try:
            got = store.get(f"{prefix}/{name}")
            found[int(name[1:])] = (OwnerRecord.from_json(got.data), got.meta.etag)
        except (ObjectNotFound, ValueError):
            continue  # gone meanwhile, or not ours
    return found


def write_owner(
    store: ObjectStore, base: str, key: str, generation: int, partition: int, record: OwnerRecord, etag: str | None
) -> str:
    """Write ``record`` as partition ``partition``'s owner: created when ``etag`` is None, else
    over the record with that tag (a take-over, a release); the new tag.

    Raises:
        PreconditionFailed: someone else wrote it first (AlreadyExists when creating).
    """
    at = _join(base, layout.dispatch_owner(key, generation, partition))
    meta = store.put_if_absent(at, record.to_json()) if etag is None else store.put_if_match(at, record.to_json(), etag)
    return meta.etag


def read_presence(store: ObjectStore, base: str, key: str, generation: int) -> dict[int, int]:
    """``{slot: token}`` of the members that said they have consumers of the generation."""
    prefix = _join(base, layout.consumer_presence_dir(key, generation))
    found: dict[int, int] = {}
    for name in _children(store, prefix):
        if not name.isdigit():
            continue
        try:
            raw = json.loads(store.get(f"{prefix}/{name}").data)
            found[int(name)] = int(raw["token"])
        except (ObjectNotFound, ValueError, KeyError, TypeError):
            continue
    return found


def set_presence(store: ObjectStore, base: str, key: str, generation: int, slot: int, token: int) -> None:
    """Say that member ``slot`` (fence token ``token``) has consumers of the generation."""
    body = json.dumps({"slot": slot, "token": token}).encode()
    store.put(_join(base, layout.consumer_presence(key, generation, slot)), body)


def clear_presence(store: ObjectStore, base: str, key: str, generation: int, slot: int) -> None:
    """Say that member ``slot`` has no consumers of the generation any more."""
    store.delete(_join(base, layout.consumer_presence(key, generation, slot)))


def _join(base: str, rel: str) -> str:
    return f"{base.rstrip('/')}/{rel}" if base else rel
