"""DeltaAppender.transaction_version on real tables: carried forward commit by commit, it gives
what delta-rs reads (the oracle) whatever wrote the commits since, and starts again on a table
made anew under the same path.

The fan-out asks it before every commit to a subscription table (jobs/table_commits.py: rows at or
below the version are dropped, which makes routing exactly once)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.tables import log_file

APP = schemas.SPARK_APP_ID


def _rows(first: int, last: int) -> pa.Table:
    """Subscription-table rows for seqs ``first..last`` (the other columns null)."""
    n = last - first + 1
    columns = {
        f.name: pa.array(range(first, last + 1), f.type) if f.name == "seq" else pa.nulls(n, f.type)
        for f in schemas.SUBSCRIPTION
    }
    return pa.table(columns, schema=schemas.SUBSCRIPTION)


def _oracle(table: str, app: str = APP) -> int | None:
    return DeltaTable(table).transaction_version(app)


def test_it_follows_its_own_commits_and_every_other_writers(tmp_path: Path) -> None:
    table = str(tmp_path / "sub")
    mine = DeltaAppender(table, schemas.SUBSCRIPTION)
    assert mine.transaction_version(APP) is None  # no table yet
    mine.append(_rows(0, 9), app_transaction=(APP, 9))  # version 0 (delta-rs makes the table)
    assert mine.transaction_version(APP) == 9
    for last in (19, 29, 39):  # blind appends
        mine.append(_rows(last - 9, last), app_transaction=(APP, last))
        assert mine.transaction_version(APP) == last == _oracle(table)

    # Another appender (a fan-out process started again), then a commit without a transaction,
    # then one through delta-rs: each is read, none is missed.
    other = DeltaAppender(table, schemas.SUBSCRIPTION)
    other.append(_rows(40, 49), app_transaction=(APP, 49))
    other.append(_rows(50, 50))
    assert mine.transaction_version(APP) == 49 == _oracle(table)
    DeltaAppender(table, schemas.SUBSCRIPTION, blind=False).append(_rows(51, 59), app_transaction=(APP, 59))
    assert mine.transaction_version(APP) == 59 == _oracle(table)
    assert mine.transaction_version("another-app") is None is _oracle(table, "another-app")
    # Several versions behind at once, and an app id recorded in between.
    other.append(_rows(60, 69), app_transaction=(APP, 69))
    other.append(_rows(70, 79), app_transaction=("another-app", 3))
    other.append(_rows(80, 89))
    assert mine.transaction_version(APP) == 69 == _oracle(table)
    assert mine.transaction_version("another-app") == 3 == _oracle(table, "another-app")


def test_a_table_made_anew_under_the_same_path_is_read_anew(tmp_path: Path) -> None:
    table = str(tmp_path / "sub")
    mine = DeltaAppender(table, schemas.SUBSCRIPTION)
    mine.append(_rows(0, 9), app_transaction=(APP, 9))
    mine.append(_rows(10, 19), app_transaction=(APP, 19))
    assert mine.transaction_version(APP) == 19

    shutil.rmtree(table)
    DeltaAppender(table, schemas.SUBSCRIPTION).append(_rows(0, 4), app_transaction=(APP, 4))  # version 0 again
    assert mine.transaction_version(APP) == 4 == _oracle(table)

    shutil.rmtree(table)
    assert mine.transaction_version(APP) is None  # dropped, not made again

    # Made again with more versions than were read before: the version read up to now names
    # another file.
    again = DeltaAppender(table, schemas.SUBSCRIPTION)
    for last in (4, 9, 14):
        again.append(_rows(last - 4, last), app_transaction=(APP, last))
    assert mine.transaction_version(APP) == 14 == _oracle(table)


def test_a_directory_under_the_next_commits_name_is_no_commit(tmp_path: Path) -> None:
    # How tests/e2e/test_fanout_faults.py blocks a table; delta-rs reads the table as it was.
    table = str(tmp_path / "sub")
    mine = DeltaAppender(table, schemas.SUBSCRIPTION)
    mine.append(_rows(0, 9), app_transaction=(APP, 9))
    assert mine.transaction_version(APP) == 9
    os.mkdir(log_file(table, 1))
    assert mine.transaction_version(APP) == 9 == _oracle(table)
