"""sharedsub.core.fanout.fanout_faults: the per-table step of a fan-out batch, as a table."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.fanout_faults import HEALTHY, Step, TableState, after_commit, after_park, decide

FAILING = TableState(parked_rows=5, failing_since=10.0, last_error="boom", failures=1, retry_at=20.0)  # due at 20
PARKED_AT_START = TableState(parked_rows=7)  # rows found on disk by a restarted job
FAILED_UNPARKED = TableState(failing_since=10.0, last_error="disk full", failures=1, retry_at=20.0)

# (state, has_rows, now, committed, parked) -> step
CASES: list[tuple[str, TableState, bool, float, bool | None, bool | None, Step]] = [
    ("healthy with rows commits", HEALTHY, True, 0.0, None, None, Step.COMMIT),
    ("healthy without rows has nothing to do", HEALTHY, False, 0.0, None, None, Step.DONE),
    ("failing, retry due: parked rows first", FAILING, True, 20.0, None, None, Step.RETRY_PARKED),
    ("failing, retry due, no new rows: parked rows still retried", FAILING, False, 25.0, None, None, Step.RETRY_PARKED),
    ("failing, not due: park without trying", FAILING, True, 19.9, None, None, Step.PARK),
    ("failing, not due, no rows: wait", FAILING, False, 19.9, None, None, Step.DONE),
    ("rows parked before a restart are due at once", PARKED_AT_START, False, 0.0, None, None, Step.RETRY_PARKED),
    ("failed with nothing parked (park failed), not due: park", FAILED_UNPARKED, True, 15.0, None, None, Step.PARK),
    ("failed with nothing parked, due: commit", FAILED_UNPARKED, True, 21.0, None, None, Step.RETRY_PARKED),
    ("commit ok", HEALTHY, True, 0.0, True, None, Step.DONE),
    ("retry ok", FAILING, False, 20.0, True, None, Step.DONE),
    ("commit failed: park the batch's rows", HEALTHY, True, 0.0, False, None, Step.PARK),
    ("retry failed with rows: park them", FAILING, True, 20.0, False, None, Step.PARK),
    ("retry failed without rows: parked rows stay", FAILING, False, 20.0, False, None, Step.DONE),
    ("parked", HEALTHY, True, 0.0, False, True, Step.DONE),
    ("parked without trying", FAILING, True, 19.0, None, True, Step.DONE),
    ("neither committed nor parked: fail the batch", HEALTHY, True, 0.0, False, False, Step.FAIL_BATCH),
    ("park failed while not due: fail the batch", FAILING, True, 19.0, None, False, Step.FAIL_BATCH),
]


@pytest.mark.parametrize(
    ("state", "has_rows", "now", "committed", "parked", "step"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(state: TableState, has_rows: bool, now: float, committed: bool | None, parked: bool | None, step: Step) -> None:
    assert decide(state, has_rows=has_rows, now=now, committed=committed, parked=parked) is step


def test_a_fault_from_first_failure_to_recovery() -> None:
    state = HEALTHY
    # Batch 1 at t=100: the commit fails, the rows are parked.
    assert decide(state, has_rows=True, now=100.0) is Step.COMMIT
    state = after_commit(state, ok=False, now=100.0, retry_interval=5.0, error="e1")
    assert decide(state, has_rows=True, now=100.0, committed=False) is Step.PARK
    state = after_park(state, 3)
    assert state == TableState(parked_rows=3, failing_since=100.0, last_error="e1", failures=1, retry_at=105.0)
    # Batch 2 at t=102: not due, parked without a commit attempt.
    assert decide(state, has_rows=True, now=102.0) is Step.PARK
    state = after_park(state, 2)
    # Batch 3 at t=106: due; the retry fails again: the failure keeps its start, the error is new.
    assert decide(state, has_rows=True, now=106.0) is Step.RETRY_PARKED
    state = after_commit(state, ok=False, now=106.0, retry_interval=5.0, error="e2")
    state = after_park(state, 1)
    assert state == TableState(parked_rows=6, failing_since=100.0, last_error="e2", failures=2, retry_at=111.0)
    # An idle retry at t=111 works: the table is healthy again.
    assert decide(state, has_rows=False, now=111.0) is Step.RETRY_PARKED
    state = after_commit(state, ok=True, now=111.0, retry_interval=5.0)
    assert state == HEALTHY and state.healthy
    assert decide(state, has_rows=True, now=112.0) is Step.COMMIT
