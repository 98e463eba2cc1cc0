"""Fencing at the Delta log (issue 28 item 4): a writer of a superseded owner epoch cannot commit
once the new owner fenced the table, on a real S3 server (versitygw) and on a local table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sharedsub.core.ownership.members import fence_token
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import EPOCH_MARK, DeltaAppender, Fenced
from sharedsub.storage.delta.commit_log import latest_version, read_log_entry
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic
from tests.s3_server import S3Server


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "data")
    server: S3Server = request.getfixturevalue("s3_server")
    request.getfixturevalue("s3_env")
    return server.url("fence")


def _rows(seqs: list[int]) -> pa.Table:
    cols = {"seq": seqs, "message": [b"m%d" % s for s in seqs]}
    return pa.table({f.name: pa.array(cols.get(f.name, [None] * len(seqs)), f.type) for f in schemas.TOPIC})


def test_a_stale_epoch_cannot_commit_after_the_new_owner_fenced_the_table(root: str) -> None:
    table = create_topic(root, "t")
    old = DeltaAppender(table, schemas.TOPIC, epoch=1)
    old.append(_rows([0, 1]))  # the old owner's table object is loaded at this version
    new = DeltaAppender(table, schemas.TOPIC, epoch=2)
    fence = new.fence()
    entry = read_log_entry(table, fence)
    assert entry is not None and entry.info[EPOCH_MARK] == "2" and entry.added == ()
    with pytest.raises(Fenced, match="owner epoch 2, this writer's is 1"):
        old.append(_rows([2, 3]))  # woke up from SIGSTOP: its next commit finds the fence
    new.append(_rows([2, 3]))
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == [0, 1, 2, 3]  # the stale rows never landed


def test_a_lower_epochs_commit_before_the_fence_is_kept_and_the_owner_goes_on(root: str) -> None:
    table = create_topic(root, "t")
    new = DeltaAppender(table, schemas.TOPIC, epoch=2)
    new.append(_rows([0]))
    DeltaAppender(table, schemas.TOPIC, epoch=1).append(_rows([1]))  # landed before any fence
    new.append(_rows([2]))  # refused once (its table object is behind), finds epoch 1: retries
    assert latest_version(table) == 3
    with pytest.raises(Fenced):
        _stale_after(table)


def _stale_after(table: str) -> None:
    stale = DeltaAppender(table, schemas.TOPIC, epoch=1)
    stale.append(_rows([3]))
    DeltaAppender(table, schemas.TOPIC, epoch=3).fence()
    stale.append(_rows([4]))


def test_a_commit_whose_retried_put_finds_its_own_log_entry_is_not_written_again(root: str) -> None:
    # The client retries a put whose answer was lost (a store that dropped the connection): the
    # retry finds the log version taken, by this very commit. Here the landed first try is made by
    # a second appender with the same commit id; the writer's table object is behind it.
    table = create_topic(root, "t")
    writer = DeltaAppender(table, schemas.TOPIC, epoch=2)
    writer.append(_rows([0]))
    landed = DeltaAppender(table, schemas.TOPIC, epoch=2).append(_rows([1]), commit_id="lost-answer")
    assert writer.append(_rows([1]), commit_id="lost-answer") == landed
    assert latest_version(table) == landed
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == [0, 1]


def test_members_of_other_slots_share_a_table_and_only_a_later_epoch_of_the_same_slot_fences(root: str) -> None:
    """The catalog is written by every member: slot 0 (epoch 5) and slot 1 (epoch 1) commit to
    one table in turn without fencing each other; slot 1 taken over (epoch 2) fences its old
    holder, and slot 0 goes on."""
    table = create_topic(root, "shared")
    zero = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(0, 5))
    one = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 1))
    zero.fence()
    one.fence()
    zero.append(_rows([0]))
    one.append(_rows([1]))
    zero.append(_rows([2]))
    taken_over = DeltaAppender(table, schemas.TOPIC, epoch=fence_token(1, 2))
    taken_over.fence()
    with pytest.raises(Fenced, match="owner epoch 2, this writer's is 1: another front end holds member slot 1 now"):
        one.append(_rows([3]))
    zero.append(_rows([4]))
    taken_over.append(_rows([5]))
    data = read_table(table, ["seq"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == [0, 1, 2, 4, 5]
