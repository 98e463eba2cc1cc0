"""The object-store interface's contract (sharedsub.storage.objects.store), on a local directory
and on a real S3 server (versitygw, tests/s3_server.py): the same tests, both implementations."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sharedsub.storage.objects import open_store
from sharedsub.storage.objects.local_store import LocalStore
from sharedsub.storage.objects.s3_store import S3Store
from sharedsub.storage.objects.store import (
    AlreadyExists,
    ObjectMeta,
    ObjectNotFound,
    ObjectStore,
    PreconditionFailed,
    StoreFailure,
)
from tests.s3_server import SECRET_KEY, S3Server


def test_put_get_head_round_trip(store: ObjectStore) -> None:
    meta = store.put("a/b/x.json", b"hello")
    got = store.get("a/b/x.json")
    assert got.data == b"hello" and got.meta.etag == meta.etag and got.meta.size == 5
    head = store.head("a/b/x.json")
    assert (head.key, head.size, head.etag) == ("a/b/x.json", 5, meta.etag)
    assert head.etag and head.modified_ms > 0
    replaced = store.put("a/b/x.json", b"hello again")
    assert store.get("a/b/x.json").data == b"hello again" and replaced.etag != meta.etag


def test_a_missing_object_is_object_not_found_also_a_file_not_found(store: ObjectStore) -> None:
    for call in (lambda: store.get("nothing/here"), lambda: store.head("nothing/here")):
        with pytest.raises(ObjectNotFound) as raised:
            call()
        assert isinstance(raised.value, FileNotFoundError)
    store.put("dir/file", b"x")
    with pytest.raises(ObjectNotFound):
        store.get("dir")  # a prefix is no object


def test_list_gives_the_prefix_in_key_order(store: ObjectStore) -> None:
    for key in ("t/_delta_log/00000000000000000002.json", "t/_delta_log/00000000000000000000.json", "t/p/f.parquet",
                "u/_delta_log/00000000000000000000.json", "t/_delta_log/00000000000000000001.json"):
        store.put(key, b"{}")
    assert [m.key for m in store.list("t/_delta_log/")] == [
        "t/_delta_log/00000000000000000000.json",
        "t/_delta_log/00000000000000000001.json",
        "t/_delta_log/00000000000000000002.json",
    ]
    assert [m.key for m in store.list("t/_delta_log/00000000000000000001")] == ["t/_delta_log/00000000000000000001.json"]
    assert len(list(store.list(""))) == 5
    assert list(store.list("nothing/")) == []
    # after=: only the keys past one (S3's start-after), still under the prefix.
    after = [m.key for m in store.list("t/_delta_log/", after="t/_delta_log/00000000000000000000.json")]
    assert after == ["t/_delta_log/00000000000000000001.json", "t/_delta_log/00000000000000000002.json"]
    assert list(store.list("t/_delta_log/", after="t/_delta_log/00000000000000000002.json")) == []


def test_put_if_absent_creates_once(store: ObjectStore) -> None:
    first = store.put_if_absent("lease", b"one")
    with pytest.raises(AlreadyExists):
        store.put_if_absent("lease", b"two")
    assert store.get("lease").data == b"one" and store.head("lease").etag == first.etag


def test_put_if_match_replaces_only_the_version_it_names(store: ObjectStore) -> None:
    v1 = store.put_if_absent("lease", b"epoch 1")
    v2 = store.put_if_match("lease", b"epoch 2", v1.etag)
    assert store.get("lease").data == b"epoch 2" and v2.etag != v1.etag
    with pytest.raises(PreconditionFailed):
        store.put_if_match("lease", b"stale writer", v1.etag)
    assert store.get("lease").data == b"epoch 2"
    store.delete("lease")
    with pytest.raises(PreconditionFailed):
        store.put_if_match("lease", b"after delete", v2.etag)
    with pytest.raises(ObjectNotFound):
        store.get("lease")


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put("x", b"1")
    store.delete("x")
    store.delete("x")
    with pytest.raises(ObjectNotFound):
        store.head("x")


def _race(n: int, attempt: Callable[[int], ObjectMeta]) -> tuple[list[int], list[Exception]]:
    """Run ``attempt(i)`` on ``n`` threads released together; (winners, refusals)."""
    start = threading.Barrier(n)
    won: list[int] = []
    refused: list[Exception] = []

    def one(i: int) -> None:
        start.wait()
        try:
            attempt(i)
            won.append(i)
        except PreconditionFailed as exc:
            refused.append(exc)

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        list(pool.map(one, range(n)))
    return won, refused


def test_racing_creators_one_wins(store: ObjectStore) -> None:
    won, refused = _race(8, lambda i: store.put_if_absent("raced", f"writer {i}".encode()))
    assert len(won) == 1 and len(refused) == 7 and all(isinstance(e, AlreadyExists) for e in refused)
    assert store.get("raced").data == f"writer {won[0]}".encode()


def test_racing_updaters_of_one_version_one_wins(store: ObjectStore) -> None:
    base = store.put("raced", b"base")
    won, refused = _race(8, lambda i: store.put_if_match("raced", f"writer {i}".encode(), base.etag))
    assert len(won) == 1 and len(refused) == 7
    assert store.get("raced").data == f"writer {won[0]}".encode()


def test_open_store_picks_by_location(tmp_path: Path) -> None:
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalStore)
    assert isinstance(open_store("s3://bucket/prefix"), S3Store)
    with pytest.raises(ValueError, match="abfss:// is not supported"):
        open_store("abfss://container@account.dfs.core.windows.net/x")


# ------------------------------------------------------------------ S3 faults: clear answers


def test_wrong_credentials_name_the_setting_and_never_the_secret(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    store = open_store(s3_server.url(), {"AWS_SECRET_ACCESS_KEY": "not-the-secret"})
    with pytest.raises(StoreFailure) as raised:
        store.put("x", b"1")
    assert not raised.value.transient
    assert "AWS_SECRET_ACCESS_KEY" in str(raised.value) and "refused the credentials" in str(raised.value)
    assert SECRET_KEY not in str(raised.value) and "not-the-secret" not in str(raised.value)


def test_a_missing_bucket_is_named(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    store = open_store("s3://no-such-bucket-here/data")
    with pytest.raises(StoreFailure, match="bucket does not exist") as raised:
        store.put("x", b"1")
    assert not raised.value.transient


def test_an_unreachable_endpoint_is_transient_and_names_the_endpoint_setting(s3_env: dict[str, str]) -> None:
    store = open_store("s3://lake/data", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "connect_timeout": "1s"})
    with pytest.raises(StoreFailure) as raised:
        store.head("x")
    assert raised.value.transient and "AWS_ENDPOINT_URL" in str(raised.value)
