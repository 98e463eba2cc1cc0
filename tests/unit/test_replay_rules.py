"""The replay rules (sharedsub/core/ops/replay.py) and the ack-log rule (sharedsub/core/delivery/acklog.py) as tables."""

from __future__ import annotations

import pytest

from sharedsub.core.delivery.acklog import ack_state
from sharedsub.core.errors import HistoryUnavailable, VersionNotFound
from sharedsub.core.ops.replay import BEFORE_FIRST_COMMIT, Commit, ReplayPlan, oldest_available, plan_replay, start_version

HOUR = 3_600_000
NOW = 1_000 * HOUR


@pytest.mark.parametrize(
    ("rows", "settled", "counts"),
    [
        ([], set(), {}),
        ([(1, "accepted")], {1}, {}),
        ([(1, "failed"), (1, "failed")], set(), {1: 2}),
        ([(1, "failed"), (1, "accepted")], {1}, {1: 1}),
        ([(1, "expired"), (2, "dead-lettered"), (3, "rejected")], {1, 2, 3}, {}),
        # a replay opens a settled message again, and counts one delivery
        ([(1, "accepted"), (1, "replayed")], set(), {1: 1}),
        # ... until its re-acknowledgement (rows carry no order: any order means the same)
        ([(1, "replayed"), (1, "accepted"), (1, "accepted")], {1}, {1: 1}),
        ([(1, "accepted"), (1, "replayed"), (1, "accepted"), (1, "replayed")], set(), {1: 2}),
        ([(1, "failed"), (1, "accepted"), (1, "replayed"), (1, "failed"), (1, "accepted")], {1}, {1: 3}),
        # a replayed row of a message whose acks maintenance removed: open
        ([(5, "replayed")], set(), {5: 1}),
    ],
)
def test_ack_state(rows: list[tuple[int, str]], settled: set[int], counts: dict[int, int]) -> None:
    state = ack_state(rows)
    assert state.settled == settled
    assert state.delivery_counts == counts


HISTORY = [Commit(0, 10 * HOUR), Commit(1, 20 * HOUR), Commit(2, 20 * HOUR + 5), Commit(3, 30 * HOUR)]
CLEANED = [Commit(4, 40 * HOUR), Commit(5, 50 * HOUR)]  # log entries 0..3 removed


@pytest.mark.parametrize(
    ("history", "version", "timestamp", "expected"),
    [
        (HISTORY, 0, None, 0),
        (HISTORY, 3, None, 3),
        (HISTORY, 4, None, VersionNotFound),
        (HISTORY, -1, None, VersionNotFound),
        ([], 0, None, VersionNotFound),
        ([], None, 5, VersionNotFound),
        (CLEANED, 3, None, HistoryUnavailable),
        (CLEANED, 4, None, 4),
        # timestamps: the latest version committed at or before T
        (HISTORY, None, 20 * HOUR, 1),
        (HISTORY, None, 20 * HOUR + 4, 1),
        (HISTORY, None, 20 * HOUR + 5, 2),
        (HISTORY, None, 99 * HOUR, 3),
        (HISTORY, None, 10 * HOUR - 1, BEFORE_FIRST_COMMIT),  # before the table: all of it
        (CLEANED, None, 45 * HOUR, 4),
        (CLEANED, None, 39 * HOUR, HistoryUnavailable),
    ],
)
def test_start_version(history: list[Commit], version: int | None, timestamp: int | None, expected: object) -> None:
    def run() -> int:
        return start_version(history, name="s", version=version, timestamp_ms=timestamp, now_ms=NOW, retention_hours=2000)

    if isinstance(expected, type):
        with pytest.raises(expected):
            run()
    else:
        assert run() == expected


def test_history_unavailable_names_the_oldest_version_and_the_setting() -> None:
    with pytest.raises(HistoryUnavailable) as err:
        start_version(CLEANED, name="app:orders", version=1, now_ms=NOW, retention_hours=2000)
    text = err.value.description
    assert "version 1" in text and "oldest version still available is 4" in text
    assert "[maintenance] history_retention_hours" in text and "2000 h" in text
    assert err.value.oldest_version == 4


@pytest.mark.parametrize(
    ("history", "retention_hours", "expected"),
    [
        ([], 1, None),
        (HISTORY, 2000, 0),  # everything retained is inside the window
        (HISTORY, 1000 - 20, 1),  # cutoff at 20 h: version 1, committed at the cutoff, is inside
        (HISTORY, 1000 - 21, 3),  # cutoff at 21 h
        (HISTORY, 0, 3),  # nothing inside the window: the latest
    ],
)
def test_oldest_available(history: list[Commit], retention_hours: int, expected: int | None) -> None:
    got = oldest_available(history, now_ms=NOW, retention_hours=retention_hours)
    assert (got.version if got else None) == expected


@pytest.mark.parametrize(
    ("at", "after", "current", "log", "expected"),
    [
        # nothing acknowledged: every row is open already; nothing to mark or restore
        ([1, 2], [3], [1, 2, 3], [], ReplayPlan((1, 2, 3), (), (), ())),
        # 1 and 2 acknowledged (in the log): marked; 3 open (waiting or outstanding): left alone
        ([1, 2], [3], [1, 2, 3], [1, 2], ReplayPlan((1, 2, 3), (1, 2), (), (1, 2))),
        # 2 acknowledged since the request, its ack row not in the log yet: open, left alone (a
        # mark the ack row never balanced, after a crash, would keep 2 open for good)
        ([1, 2], [3], [1, 2, 3], [1], ReplayPlan((1, 2, 3), (1,), (), (1,))),
        # maintenance deleted 1 and 2 (and their ack rows) since: restored, not marked
        ([1, 2], [3], [3], [], ReplayPlan((1, 2, 3), (), (1, 2), (1, 2))),
        # ... a leftover ack row of a deleted message (the second delete failed): marked and restored
        ([1, 2], [3], [3], [2], ReplayPlan((1, 2, 3), (2,), (1, 2), (1, 2))),
        # rows appended after the start and deleted since are replayed too
        ([], [4, 5], [6], [], ReplayPlan((4, 5), (), (4, 5), (4, 5))),
        # rows routed before the start version and deleted before it are not replayed
        ([7], [8], [7, 8, 9], [1, 7], ReplayPlan((7, 8), (7,), (), (7,))),
    ],
)
def test_plan_replay(
    at: list[int], after: list[int], current: list[int], log: list[int], expected: ReplayPlan
) -> None:
    assert plan_replay(at, after, current, log) == expected
