"""Who dispatches each topic partition of a subscription generation shared by members of a data
dir on object storage (the rules are sharedsub.core.ownership.partition_owners'; the keys
sharedsub.core.layout's; who has consumers is sharedsub.storage.cluster.presence's). One small
JSON object per partition, written with the store's conditional puts, never with a lock:

* owner ``_cluster/dispatch/<key>/g<gen>/p<k>``: ``{slot, token, released}``, created with
  put-if-absent, taken over and released with put-if-match on the tag read, so two members
  that decide to take the same partition cannot both succeed.

``token`` is the member's fence token (sharedsub.core.ownership.members.fence_token).
"""

from __future__ import annotations

import dataclasses
import json

from sharedsub.core import layout
from sharedsub.storage.cluster.record_keys import children, under
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


def read_owners(store: ObjectStore, base: str, key: str, generation: int) -> dict[int, tuple[OwnerRecord, str]]:
    """``{partition: (record, tag)}`` of a generation's owner records (one LIST, a GET each);
    ``base``: the data dir's key in ``store`` (sharedsub.storage.objects.locations.locate)."""
    prefix = under(base, layout.dispatch_owners_dir(key, generation))
    found: dict[int, tuple[OwnerRecord, str]] = {}
    for name in children(store, prefix):
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
    at = under(base, layout.dispatch_owner(key, generation, partition))
    meta = store.put_if_absent(at, record.to_json()) if etag is None else store.put_if_match(at, record.to_json(), etag)
    return meta.etag
