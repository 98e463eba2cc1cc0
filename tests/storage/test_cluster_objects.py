"""Presence and dispatch-owner objects of members sharing a subscription
(sharedsub.storage.cluster.owner_records, presence), and claim objects
(sharedsub.storage.cluster.claim_objects), on a local store and on a real S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharedsub.core import layout
from sharedsub.runtime.cluster.cluster_status import read_dispatch
from sharedsub.storage.cluster.claim_objects import Claim, create_claim, read_claim, release_claim, replace_claim
from sharedsub.storage.cluster.owner_records import OwnerRecord, read_owners, write_owner
from sharedsub.storage.cluster.presence import clear_presence, read_presence, set_presence
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


def test_a_claim_is_created_once_replaced_on_its_tag_and_released_only_by_its_token(
    where: tuple[ObjectStore, str],
) -> None:
    store, _ = where
    key = layout.claim_key("containers", "c1")
    assert read_claim(store, key) is None
    create_claim(store, key, Claim(0, 3))
    with pytest.raises(AlreadyExists):
        create_claim(store, key, Claim(1, 5))
    found = read_claim(store, key)
    assert found is not None and found[0] == Claim(0, 3)
    with pytest.raises(PreconditionFailed):
        replace_claim(store, key, Claim(1, 5), '"not-its-tag"')
    replace_claim(store, key, Claim(1, 5), found[1])
    release_claim(store, key, 3)  # another's token: stays
    after = read_claim(store, key)
    assert after is not None and after[0] == Claim(1, 5)
    release_claim(store, key, 5)
    assert read_claim(store, key) is None
    release_claim(store, key, 5)  # twice: nothing to remove, no error


def test_an_object_that_is_not_a_claim_reads_as_no_member_s(where: tuple[ObjectStore, str]) -> None:
    store, _ = where
    key = layout.claim_key("subscriptions", "x")
    store.put(key, b"not json")
    found = read_claim(store, key)
    assert found is not None and found[0] == Claim(-1, -1)
    release_claim(store, key, -1)  # not a claim: left alone
    assert read_claim(store, key) is not None


def test_the_dispatch_records_are_read_whole_or_only_the_first_few(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    """sharedsub cluster status reads every dispatch record; the console only the first few
    (connectors/http/console.py: a GET each on a bucket)."""
    root = s3_server.url("dispatch-records")
    store = open_store(root)
    for partition in range(3):
        write_owner(store, "", KEY, 1, partition, OwnerRecord(partition % 2, 1), None)
    assert [(d.partition, d.owner) for d in read_dispatch(root)] == [(0, 0), (1, 1), (2, 0)]
    assert len(read_dispatch(root, limit=2)) == 2
