"""Commits on object storage (sharedsub.storage.delta.object_append) against a real S3 server
(versitygw), counted where they arrive: its access log sees every client's requests, delta-rs's too.

A commit of a loaded table is two requests (the data file's PUT, the log entry's put-if-absent),
for the committer's appends and for the fan-out's commits with app transactions; what another
writer put at the version a commit was to take is read once and stepped over, or ends the commit
as object_append's module docstring says; delta-rs reads every table written so, checkpoints
included.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from sharedsub.core.ownership.members import fence_token
from sharedsub.storage import schemas
from sharedsub.storage.delta import blind_append
from sharedsub.storage.delta.appender import DeltaAppender, Fenced, VersionTaken
from sharedsub.storage.delta.commit_log import latest_version, read_log_entry
from sharedsub.storage.delta.data_files import write_data_file
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import log_names
from sharedsub.storage.objects.locations import storage_options
from sharedsub.storage.topics import create_topic
from tests.s3_server import S3Server


@pytest.fixture
def root(counted_root: str) -> str:
    """A data dir on this module's counted S3 server (tests/storage/conftest.py)."""
    return counted_root


def _bucket(root: str) -> str:
    """The bucket of ``root`` (each test's data dir has its own): the requests a test counts."""
    return root.removeprefix("s3://").split("/", 1)[0]


def _rows(seqs: list[int], schema: pa.Schema = schemas.TOPIC) -> pa.Table:
    cols = {"seq": seqs, "message": [b"m%d" % s for s in seqs]}
    return pa.table({f.name: pa.array(cols.get(f.name, [None] * len(seqs)), f.type) for f in schema})


def test_a_commit_of_a_loaded_table_is_a_data_put_and_a_log_put(root: str, counted: S3Server) -> None:
    table = create_topic(root, "t")
    writer = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 1))
    writer.append(_rows([0]))  # loads the table once
    start = counted.access_mark()
    for seq in range(1, 6):
        writer.append(_rows([seq]))
    made = counted.requests_since(start, _bucket(root))
    assert [op for op, _ in made] == ["s3_PutObject"] * 10, made
    assert [key.endswith(".parquet") for _, key in made] == [True, False] * 5
    assert all("_delta_log/" in key for _, key in made[1::2])
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(6))
    assert DeltaTable(table, storage_options=storage_options(table)).version() == latest_version(table) == 6


def test_a_fanout_commit_reads_its_marks_from_memory_and_is_two_requests(root: str, counted: S3Server) -> None:
    table = f"{root}/subscriptions/s"
    writer = DeltaAppender(table, schemas.SUBSCRIPTION, epoch=fence_token(0, 1))
    assert writer.transaction_version("fanout-0") is None
    assert writer.append(_rows([0, 1], schemas.SUBSCRIPTION), app_transactions=[("fanout-0", 1)]) == 0  # made here
    start = counted.access_mark()
    for seq in range(2, 5):
        assert writer.transaction_version("fanout-0") == seq - 1
        files = [write_data_file(table, _rows([seq], schemas.SUBSCRIPTION))]
        writer.append_files(files, app_transactions=[("fanout-0", seq)])
    assert len(counted.requests_since(start, _bucket(root))) == 6
    loaded = DeltaTable(table, storage_options=storage_options(table))
    assert loaded.transaction_version("fanout-0") == 4 and loaded.version() == 3


def test_a_new_tables_first_commit_is_one_list_and_two_puts(root: str, counted: S3Server) -> None:
    table = f"{root}/subscriptions/new"
    start = counted.access_mark()
    DeltaAppender(table, schemas.SUBSCRIPTION).append(_rows([0], schemas.SUBSCRIPTION))
    made = sorted(op for op, _ in counted.requests_since(start, _bucket(root)))
    assert made == ["s3_ListObjectsV2", "s3_PutObject", "s3_PutObject"]
    loaded = DeltaTable(table, storage_options=storage_options(table))
    assert loaded.version() == 0 and loaded.to_pyarrow_table().column("seq").to_pylist() == [0]


def test_a_version_another_writer_took_is_read_once_and_stepped_over(root: str, counted: S3Server) -> None:
    table = create_topic(root, "t")
    writer = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 1))
    writer.append(_rows([0]))
    DeltaAppender(table, schemas.TOPIC, blind=False).append(_rows([100]))  # a maintenance-like commit by delta-rs
    start = counted.access_mark()
    version = writer.append(_rows([1]))
    ops = [op for op, _ in counted.requests_since(start, _bucket(root))]
    assert version == 3 and sorted(ops) == ["s3_GetObject", "s3_PutObject", "s3_PutObject", "s3_PutObject"], ops
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == [0, 1, 100]


def test_another_writers_commit_of_the_same_marks_makes_the_commit_decide_again(root: str) -> None:
    table = f"{root}/subscriptions/s"
    writer = DeltaAppender(table, schemas.SUBSCRIPTION)
    writer.append(_rows([0], schemas.SUBSCRIPTION), app_transactions=[("fanout-0", 0)])
    assert writer.transaction_version("fanout-0") == 0
    # A Spark task (its own appender) commits seqs 1-2 of the same partition meanwhile.
    DeltaAppender(table, schemas.SUBSCRIPTION, guarded=True).append(
        _rows([1, 2], schemas.SUBSCRIPTION), app_transactions=[("fanout-0", 2)]
    )
    with pytest.raises(VersionTaken):
        writer.append(_rows([1, 2], schemas.SUBSCRIPTION), app_transactions=[("fanout-0", 2)])
    assert writer.transaction_version("fanout-0") == 2  # the table loaded again
    writer.append(_rows([3], schemas.SUBSCRIPTION), app_transactions=[("fanout-0", 3)])  # and on it goes
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == [0, 1, 2, 3]  # nothing twice


def test_a_fenced_writer_stops_at_the_new_owners_fence(root: str) -> None:
    table = create_topic(root, "t")
    old = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 1))
    old.append(_rows([0]))
    DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 2)).fence()
    with pytest.raises(Fenced):
        old.append(_rows([1]))
    data = read_table(table, ["seq"])
    assert data is not None and data.column("seq").to_pylist() == [0]


def test_checkpoints_are_written_and_delta_rs_reads_past_them(root: str) -> None:
    table = create_topic(root, "t")
    writer = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 1))
    for seq in range(blind_append.CHECKPOINT_INTERVAL + 2):
        writer.append(_rows([seq]))
    writer.finish(60)
    loaded = DeltaTable(table, storage_options=storage_options(table))
    assert loaded.version() == blind_append.CHECKPOINT_INTERVAL + 2
    names = {Path(n).name for n in log_names(table)}
    assert f"{blind_append.CHECKPOINT_INTERVAL:020d}.checkpoint.parquet" in names and "_last_checkpoint" in names
    assert sorted(loaded.to_pyarrow_table(columns=["seq"]).column("seq").to_pylist()) == list(
        range(blind_append.CHECKPOINT_INTERVAL + 2)
    )
    entry = read_log_entry(table, blind_append.CHECKPOINT_INTERVAL + 2)
    assert entry is not None and len(entry.added) == 1



def test_a_checkpoint_is_made_from_the_entries_the_writer_holds_not_a_reread_log(root: str, counted: S3Server) -> None:
    interval = blind_append.CHECKPOINT_INTERVAL
    table = create_topic(root, "t")
    writer = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 1))
    for seq in range(2 * interval - 1):
        writer.append(_rows([seq]))
    writer.finish(60)
    start = counted.access_mark()
    writer.append(_rows([2 * interval - 1]))  # version 2 * interval: its checkpoint is due
    writer.finish(60)
    made = counted.requests_since(start, _bucket(root))
    # the commit's two puts; _last_checkpoint and the checkpoint it names read once each; the
    # new checkpoint and _last_checkpoint put: no LIST, no log entry read again
    assert sorted(op for op, _ in made) == ["s3_GetObject"] * 2 + ["s3_PutObject"] * 4, made
    gets = sorted(Path(key).name for op, key in made if op == "s3_GetObject")
    assert gets == [f"{interval:020d}.checkpoint.parquet", "_last_checkpoint"]
    names = {Path(n).name for n in log_names(table)}
    assert f"{2 * interval:020d}.checkpoint.parquet" in names
    writer.append(_rows([2 * interval]))
    for version in (interval + 1, 2 * interval, 2 * interval + 1):
        loaded = DeltaTable(table, version=version, storage_options=storage_options(table))
        assert sorted(loaded.to_pyarrow_table(columns=["seq"]).column("seq").to_pylist()) == list(range(version))


def test_new_versions_are_found_by_two_heads_and_one_list_not_a_head_each(root: str, counted: S3Server) -> None:
    table = create_topic(root, "t")
    writer = DeltaAppender(table, schemas.TOPIC)
    for seq in range(6):
        writer.append(_rows([seq]))
    start = counted.access_mark()
    assert latest_version(table, 1) == 6
    assert sorted(op for op, _ in counted.requests_since(start, _bucket(root))) == ["s3_HeadObject"] * 2 + ["s3_ListObjectsV2"]
    start = counted.access_mark()
    assert latest_version(table, 5) == 6  # one new: two HEADs, no LIST (billed as twelve HEADs)
    assert [op for op, _ in counted.requests_since(start, _bucket(root))] == ["s3_HeadObject"] * 2
    start = counted.access_mark()
    assert latest_version(table, 6) == 6  # nothing new: the one HEAD
    assert [op for op, _ in counted.requests_since(start, _bucket(root))] == ["s3_HeadObject"]
