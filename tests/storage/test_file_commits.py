"""Committing files written before their commit (sharedsub.storage.delta.file_commits), on a local
table and on a bucket: each row once whatever the order of attempts, files left out removed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender, VersionTaken
from sharedsub.storage.delta.data_files import DataFile, write_data_file
from sharedsub.storage.delta.file_commits import commit_routed_files
from sharedsub.storage.delta.table_reads import read_table, snapshot_files
from sharedsub.storage.delta.tables import data_files, table_exists
from tests.s3_server import S3Server

APP = schemas.SPARK_APP_ID
T0 = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def _full(seqs: range) -> pa.Table:
    """Subscription rows with the given seqs (topic "t", times T0, the rest null)."""
    columns = {}
    for field in schemas.SUBSCRIPTION:
        if field.name == "seq":
            columns[field.name] = pa.array(list(seqs), field.type)
        elif field.name == "topic":
            columns[field.name] = pa.array(["t"] * len(seqs), field.type)
        elif pa.types.is_timestamp(field.type):
            columns[field.name] = pa.array([T0] * len(seqs), field.type)
        else:
            columns[field.name] = pa.nulls(len(seqs), field.type)
    return pa.table(columns, schema=schemas.SUBSCRIPTION)


@pytest.fixture(params=["local", "s3"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A subscription table's location with one commit (seqs 0-4) and app transaction 4."""
    if request.param == "local":
        path = str(tmp_path / "sub")
    else:
        server: S3Server = request.getfixturevalue("s3_server")
        request.getfixturevalue("s3_env")
        path = f"{server.url()}/sub"
    DeltaAppender(path, schemas.SUBSCRIPTION).append(_full(range(5)), app_transaction=(APP, 4))
    return path


def seqs(table: str) -> list[int]:
    data = read_table(table, ["seq"])
    assert data is not None
    return sorted(data.column("seq").to_pylist())


def test_files_are_committed_once_and_a_second_attempt_commits_nothing(table: str) -> None:
    first = [write_data_file(table, _full(range(5, 10))), write_data_file(table, _full(range(10, 12)))]
    done = commit_routed_files(DeltaAppender(table, schemas.SUBSCRIPTION), first, APP, schemas.SUBSCRIPTION)
    assert done.rows == 7 and done.version == 1
    # Another attempt of the same batch (a retried task): its own files of the same rows.
    again = [write_data_file(table, _full(range(5, 10))), write_data_file(table, _full(range(10, 12)))]
    guarded = DeltaAppender(table, schemas.SUBSCRIPTION, guarded=True)
    assert commit_routed_files(guarded, again, APP, schemas.SUBSCRIPTION).rows == 0
    assert seqs(table) == list(range(12))
    assert sorted(data_files(table)) == sorted(snapshot_files(table)), "the second attempt's files were left"


def test_a_file_straddling_the_recorded_version_is_trimmed(table: str) -> None:
    """A batch read again from an older start (a lost checkpoint) holds rows the table has."""
    files = [write_data_file(table, _full(range(2, 8))), write_data_file(table, _full(range(8, 9)))]
    done = commit_routed_files(DeltaAppender(table, schemas.SUBSCRIPTION), files, APP, schemas.SUBSCRIPTION)
    assert done.rows == 4
    assert seqs(table) == list(range(9))
    assert sorted(data_files(table)) == sorted(snapshot_files(table))


def test_a_guarded_appender_never_rebases_onto_another_writers_commit(table: str) -> None:
    """Two attempts of one commit task race: the loser's version is taken, and it says so
    instead of committing its rows on top (what delta-rs's own retry would do)."""
    loser = DeltaAppender(table, schemas.SUBSCRIPTION, guarded=True)
    assert loser.transaction_version(APP) == 4  # loaded at version 0
    winner = DeltaAppender(table, schemas.SUBSCRIPTION, guarded=True)
    commit_routed_files(winner, [write_data_file(table, _full(range(5, 7)))], APP, schemas.SUBSCRIPTION)
    with pytest.raises(VersionTaken):
        loser.append_files([write_data_file(table, _full(range(5, 7)))], app_transaction=(APP, 6))
    assert seqs(table) == list(range(7))
    # Deciding again, the loser finds the rows there.
    assert commit_routed_files(loser, [write_data_file(table, _full(range(5, 7)))], APP, schemas.SUBSCRIPTION).rows == 0
    assert seqs(table) == list(range(7))


def test_files_for_a_table_not_created_yet_become_its_first_commit(tmp_path: Path) -> None:
    path = str(tmp_path / "new")
    files: list[DataFile] = [write_data_file(path, _full(range(0, 3)))]
    assert not table_exists(path)
    done = commit_routed_files(DeltaAppender(path, schemas.SUBSCRIPTION), files, APP, schemas.SUBSCRIPTION)
    assert done.rows == 3 and seqs(path) == [0, 1, 2]
    assert DeltaAppender(path, schemas.SUBSCRIPTION).transaction_version(APP) == 2
    assert sorted(data_files(path)) == sorted(snapshot_files(path))


def test_a_file_of_rows_without_seq_is_written_too(tmp_path: Path) -> None:
    """The blind append writes every table's files this way (the link events table has no seq)."""
    written = write_data_file(str(tmp_path / "t"), pa.table({"link": ["a", "b"]}))
    assert (written.rows, written.min_seq, written.max_seq) == (2, -1, -1)
