"""The start-up probe of an object store refuses one that ignores conditional writes
(sharedsub.storage.objects.probe). No such store runs here (versitygw honours both conditions:
tests/storage/test_object_store.py), so these stores are stand-ins that break the contract the
way such a store would, on top of the local implementation."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedsub.core.errors import StoreUnusable
from sharedsub.storage.objects.local_store import LocalStore
from sharedsub.storage.objects.probe import probe_store
from sharedsub.storage.objects.store import ObjectMeta


class IgnoresIfNoneMatch(LocalStore):
    def put_if_absent(self, key: str, data: bytes) -> ObjectMeta:
        return self.put(key, data)


class IgnoresIfMatch(LocalStore):
    def put_if_match(self, key: str, data: bytes, etag: str) -> ObjectMeta:
        return self.put(key, data)


def test_a_store_that_keeps_the_contract_passes_and_keeps_nothing(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    probe_store(store)
    assert list(store.list("")) == []


@pytest.mark.parametrize(("kind", "says"), [(IgnoresIfNoneMatch, "ignores If-None-Match"), (IgnoresIfMatch, "ignores If-Match")])
def test_a_store_that_ignores_a_condition_is_refused_naming_it(tmp_path: Path, kind: type[LocalStore], says: str) -> None:
    with pytest.raises(StoreUnusable, match=says) as raised:
        probe_store(kind(str(tmp_path)))
    assert str(tmp_path) in str(raised.value)
