"""The marks sharedsub writes into Delta commit logs are read back under the same keys: tables
written by earlier releases carry them, so a renamed key would make old maintenance commits
look like new rows (delivered again) and old commit ids unfindable."""

from __future__ import annotations

from pathlib import Path

from deltalake import CommitProperties, write_deltalake

from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender, find_commit
from sharedsub.storage.delta.commit_log import read_commit
from tests.storage.test_disk_faults import _rows

# As written into the logs of existing tables; these strings are data, not names of modules.
PERSISTED_MAINTENANCE_KEY = "sharedsub.maintenance"
PERSISTED_COMMIT_KEY = "sharedsub.commit"


def test_a_maintenance_commit_of_an_older_release_adds_no_rows(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    DeltaAppender(table, schemas.TOPIC).append(_rows(0))
    # a rewrite as an earlier release's maintenance marked it (the rows it re-adds are not new)
    write_deltalake(table, _rows(0), mode="append",
                    commit_properties=CommitProperties(custom_metadata={PERSISTED_MAINTENANCE_KEY: "delete"}))
    plain = read_commit(table, 0)
    marked = read_commit(table, 1)
    assert plain is not None and len(plain.added) == 1
    assert marked is not None and marked.added == ()


def test_a_commit_id_of_an_older_release_is_found(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    write_deltalake(table, _rows(0).cast(schemas.TOPIC), mode="append",
                    commit_properties=CommitProperties(custom_metadata={PERSISTED_COMMIT_KEY: "abc"}))
    assert find_commit(table, "abc", after=-1) == 0
