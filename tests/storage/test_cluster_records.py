"""Presence and dispatch-owner objects of members sharing a subscription
(sharedsub.storage.cluster.owner_records), on a local store and on a real S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedsub.storage.cluster.owner_records import (
    OwnerRecord,
    clear_presence,
    read_owners,
    read_presence,
    set_presence,
    write_owner,
)
from sharedsub.storage.objects import open_store
from sharedsub.storage.objects.store import AlreadyExists, ObjectStore, PreconditionFailed
from tests.s3_server import S3Server

KEY = "shared-durable~global~orders~0123456789"


@pytest.fixture(params=["local", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[ObjectStore, str]:
    if request.param == "local":
        root = str(tmp_path / "data")
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        request.getfixturevalue("s3_env")
        root = server.url("records")
    return open_store(root), ""  # a store rooted at the data dir: keys are relative to it


def test_one_taker_wins_a_partition_and_a_release_is_taken_over_with_its_tag(where: tuple[ObjectStore, str]) -> None:
    store, base = where
    assert read_owners(store, base, KEY, 1) == {}
    tag = write_owner(store, base, KEY, 1, 0, OwnerRecord(0, 3), None)
    with pytest.raises(AlreadyExists):
        write_owner(store, base, KEY, 1, 0, OwnerRecord(1, 1), None)  # the second taker loses
    write_owner(store, base, KEY, 1, 1, OwnerRecord(1, 1), None)
    owners = read_owners(store, base, KEY, 1)
    assert {p: r for p, (r, _) in owners.items()} == {0: OwnerRecord(0, 3), 1: OwnerRecord(1, 1)}
    released = write_owner(store, base, KEY, 1, 0, OwnerRecord(0, 3, released=True), tag)
    with pytest.raises(PreconditionFailed):
        write_owner(store, base, KEY, 1, 0, OwnerRecord(1, 1), tag)  # a stale tag: someone wrote since
    write_owner(store, base, KEY, 1, 0, OwnerRecord(1, 1), released)
    assert read_owners(store, base, KEY, 1)[0][0] == OwnerRecord(1, 1)
    assert read_owners(store, base, KEY, 2) == {}  # another generation has its own


def test_members_say_they_have_consumers_and_take_it_back(where: tuple[ObjectStore, str]) -> None:
    store, base = where
    set_presence(store, base, KEY, 1, 0, 3)
    set_presence(store, base, KEY, 1, 1, (1 << 32) | 1)
    assert read_presence(store, base, KEY, 1) == {0: 3, 1: (1 << 32) | 1}
    clear_presence(store, base, KEY, 1, 0)
    clear_presence(store, base, KEY, 1, 0)  # twice: nothing to remove, no error
    assert read_presence(store, base, KEY, 1) == {1: (1 << 32) | 1}
