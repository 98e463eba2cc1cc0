"""Who has consumers of a subscription generation shared by members of a data dir on object
storage (the rules that read it are sharedsub.core.ownership.partition_owners' and
unconsumed's; the keys sharedsub.core.layout's). One small JSON object per member:

* presence ``_cluster/consumers/<key>/g<gen>/<slot>``: ``{slot, token}``, put while member
  ``slot`` has consumer links of the generation, deleted after its last one goes; void once
  that slot's lease carries another token (the member died or lost its slot).

``token`` is the member's fence token (sharedsub.core.ownership.members.fence_token).
"""

from __future__ import annotations

import json

from sharedsub.core import layout
from sharedsub.storage.cluster.record_keys import children, under
from sharedsub.storage.objects.store import ObjectNotFound, ObjectStore


def read_presence(store: ObjectStore, base: str, key: str, generation: int) -> dict[int, int]:
    """``{slot: token}`` of the members that said they have consumers of the generation."""
    prefix = under(base, layout.consumer_presence_dir(key, generation))
    found: dict[int, int] = {}
    for name in children(store, prefix):
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
    store.put(under(base, layout.consumer_presence(key, generation, slot)), body)


def clear_presence(store: ObjectStore, base: str, key: str, generation: int, slot: int) -> None:
    """Say that member ``slot`` has no consumers of the generation any more."""
    store.delete(under(base, layout.consumer_presence(key, generation, slot)))
