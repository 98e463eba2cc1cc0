"""The fan-out's progress record (sharedsub.core.ops.fanout_progress): when it is written, what it
says, and what retention may conclude from it (FanoutProgress.writes_follow)."""

from __future__ import annotations

import pytest

from sharedsub.core.ops import fanout_progress
from sharedsub.core.ops.retention import FanoutProgress


@pytest.mark.parametrize(
    ("changed", "since_last", "due"),
    [
        (False, None, True),
        (True, None, True),
        (True, 4.9, False),
        (True, 5.0, True),
        (False, 14.9, False),
        (False, 15.0, True),
    ],
)
def test_when_the_record_is_written(changed: bool, since_last: float | None, due: bool) -> None:
    assert fanout_progress.due(changed=changed, since_last=since_last) is due


def test_a_record_says_what_was_routed_and_when() -> None:
    data = fanout_progress.encode({"t": 4, "u": 0}, {"t": "id-t"}, batch=7, at_ms=1_000)
    progress = fanout_progress.decode(data)
    assert progress == FanoutProgress({"t": 4, "u": 0}, {"t": "id-t"}, planned_ms=None, found=True, as_of_ms=1_000)
    assert progress.routed_version("t", "id-t") == 4
    assert progress.routed_version("t", "another-table") == -1  # dropped and created again
    assert progress.routed_version("u", "id-u") == -1  # its id unknown: nothing counts as routed


@pytest.mark.parametrize("data", [b"", b"[]", b'{"versions": {"t": "x"}, "at_ms": 1}', b'{"versions": {}}', b"\xff"])
def test_what_is_not_a_record_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="fan-out progress record"):
        fanout_progress.decode(data)


@pytest.mark.parametrize(
    ("progress", "catalog_written_ms", "follows"),
    [
        (FanoutProgress(), 100, False),  # no checkpoint, no record: the fan-out may run elsewhere
        (FanoutProgress(found=True), 100, True),  # a live checkpoint with nothing in flight
        (FanoutProgress(found=True, planned_ms=99), 100, False),  # in flight, planned before
        (FanoutProgress(found=True, planned_ms=101), 100, True),  # in flight, planned after
        (FanoutProgress(found=True, as_of_ms=99), 100, False),  # a record made before the commit
        (FanoutProgress(found=True, as_of_ms=101), 100, True),  # made after: every later batch follows
    ],
)
def test_whether_the_fanouts_writes_follow_a_catalog_commit(
    progress: FanoutProgress, catalog_written_ms: int, follows: bool
) -> None:
    assert progress.writes_follow(catalog_written_ms) is follows
