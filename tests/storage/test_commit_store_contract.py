"""The CommitStore contract (sharedsub.storage.commits.commit_store), held against both stores: the Delta
store on a tmp dir and the in-memory store tests of the runtime use. A runtime test on the
memory store is only worth something if the two agree on everything here."""

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from sharedsub.core import layout
from sharedsub.core.errors import TopicExists
from sharedsub.storage import schemas
from sharedsub.storage.commits.append_process import AppendProcess
from sharedsub.storage.commits.commit_store import CommitStore, DeltaStore
from sharedsub.storage.commits.memory_store import MemoryStore
from sharedsub.storage.commits.py_columns import PyColumns
from sharedsub.storage.delta.table_reads import read_table
from tests import builders as b


@pytest.fixture(params=["delta", "delta-child", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CommitStore]:
    made: CommitStore
    if request.param == "memory":
        made = MemoryStore()
    else:
        made = DeltaStore(str(tmp_path / "data"), appends=AppendProcess() if request.param == "delta-child" else None)
    made.start()
    try:
        yield made
    finally:
        made.stop()


def rows_of(store: CommitStore, path: str) -> list[int]:
    if isinstance(store, MemoryStore):
        data = store.rows(path)
    else:
        data = read_table(path, ["seq"]) or pa.table({"seq": pa.array([], pa.int64())})
    return sorted(data.column("seq").to_pylist())


def topic_rows(seqs: list[int]) -> pa.Table:
    n = len(seqs)
    columns = {f.name: pa.nulls(n, f.type) for f in schemas.TOPIC}
    columns["seq"] = pa.array(seqs, pa.int64())
    columns["topic"] = pa.array(["t"] * n, pa.string())
    columns["partition"] = pa.array([0] * n, pa.int32())
    columns["published_at"] = pa.array([b.T0] * n, schemas.TOPIC.field("published_at").type)
    columns["message"] = pa.array([b"m"] * n, pa.binary())
    columns["size"] = pa.array([1] * n, schemas.TOPIC.field("size").type)
    return pa.table(columns, schema=schemas.TOPIC)


def test_a_topic_is_created_once_numbered_from_its_rows_and_removed(store: CommitStore) -> None:
    path = store.create_topic("t")
    assert path == layout.topic_table(store.root, "t")
    with pytest.raises(TopicExists):
        store.create_topic("t")
    assert store.last_seq("t") == -1
    appender = store.appender(path, schemas.TOPIC)
    first = appender.append(topic_rows([0, 1, 2]), commit_id="a")
    second = appender.append(topic_rows([3]), commit_id="b")
    appender.close()
    assert second == first + 1
    assert store.last_seq("t") == 3 and rows_of(store, path) == [0, 1, 2, 3]
    store.remove_topic("t")
    store.remove_topic("t")  # nothing there: nothing happens
    store.create_topic("t")
    assert store.last_seq("t") == -1


def test_tables_are_created_by_their_first_append(store: CommitStore) -> None:
    path = layout.join(store.root, "subscriptions", "k", "g1-acks")
    appender = store.appender(path, schemas.ACK)
    columns = {"seq": [5, 6], "outcome": ["accepted"] * 2, "acked_at": [b.T0] * 2, "consumer": ["c"] * 2}
    data = pa.table(columns, schema=schemas.ACK)
    first = appender.append(data, commit_id="a")
    assert appender.append(data, commit_id="b") == first + 1
    # Rows as column lists (what the committer hands a topic append) commit the same way.
    assert appender.append(PyColumns(schemas.ACK, {**columns, "seq": [7, 8]}), commit_id="c") == first + 2
    appender.close()
    assert rows_of(store, path) == [5, 5, 6, 6, 7, 8]


def test_the_catalog_revision_is_the_highest_committed(store: CommitStore) -> None:
    assert store.catalog_revision() == 0
    records = [dataclasses.replace(b.subscription("t", name=n), revision=r) for n, r in (("a", 3), ("b", 7))]
    appender = store.catalog_appender()
    appender.append(pa.Table.from_pylist([r.to_row() for r in records], schema=schemas.CATALOG), commit_id="c")
    assert store.catalog_revision() == 7


def test_a_commit_not_forced_to_disk_is_told_apart_and_found_again() -> None:
    """Only the memory store can be told to fail after its commit (on Delta the fsync failure
    needs a broken disk: tests/storage/test_disk_faults.py)."""
    store = MemoryStore()
    path = store.create_topic("t")
    appender = store.appender(path, schemas.TOPIC)
    store.fail(errno.EIO, landed=True)
    with pytest.raises(OSError, match=r"\[Errno 5\]|Input/output error") as raised:
        appender.append(topic_rows([0]), commit_id="x")
    assert store.committed_unsynced(raised.value) and raised.value.errno == errno.EIO
    assert store.rows(path).num_rows == 1  # it landed
    assert not store.committed_unsynced(OSError(errno.EIO, "other"))
    store.heal()
    assert appender.append(topic_rows([0]), commit_id="x") == 1
    assert store.rows(path).num_rows == 1
