"""What the fan-out does with one subscription table in one micro-batch when commits to it fail; pure.

One subscription table that cannot be written (a full or broken disk under it, a damaged log)
must not stop routing for the others. Its routed rows are *parked*: stored durably by the job
(jobs/parking.py, sharedsub/storage/parked_rows.py: ``<data>/_fanout/pending/``) before
the batch is reported done, because Spark does not replay a batch that succeeded. Parked rows
are committed before any newer row of that table, so the table still gets every row once and in
``seq`` order.

:func:`decide` is the rule, asked again after each attempt of the batch::

    state                         attempt so far            step
    ----------------------------  ------------------------  ------------
    nothing parked, not failing   none, rows to write       COMMIT
    nothing parked, not failing   none, no rows             DONE
    parked or failing, retry due  none                      RETRY_PARKED (parked rows, then the batch's)
    parked or failing, not due    none, rows to write       PARK (no commit attempt)
    parked or failing, not due    none, no rows             DONE
    any                           commit ok                 DONE
    any                           commit failed, rows       PARK
    any                           commit failed, no rows    DONE (what was parked stays parked)
    any                           park ok                   DONE
    any                           park failed               FAIL_BATCH (Spark retries the batch)

:class:`TableState` is what the job keeps per table between batches, changed by
:func:`after_commit` and :func:`after_park`. A failed commit makes the table *failing*: it is
tried again ``retry_interval`` seconds later, not on every batch (a failing commit can take
seconds of retries, which would slow every batch). A table with parked rows and no failure
recorded (rows found on disk when the job starts) is due at once.

Exactly once: the job's commits drop rows at or below the table's app-transaction version, so
committing parked rows that an earlier attempt already committed (a crash between the commit and
the removal of the parked files, a batch replayed after its rows were parked) writes nothing
twice.
"""

from __future__ import annotations

import dataclasses
import enum


class Step(enum.Enum):
    """What to do next with one table in one batch."""

    COMMIT = "commit"  # commit the batch's rows
    RETRY_PARKED = "retry-parked"  # commit the parked rows, then the batch's rows, in seq order
    PARK = "park"  # store the batch's rows durably for a later retry; no commit attempt
    DONE = "done"  # nothing (more) to do for this table in this batch
    FAIL_BATCH = "fail-batch"  # rows could be neither committed nor parked: fail the micro-batch


@dataclasses.dataclass(frozen=True, slots=True)
class TableState:
    """One subscription table's standing between batches (times: seconds since the epoch)."""

    parked_rows: int = 0  # rows stored for a retry
    failing_since: float | None = None  # first failed commit of the current fault
    last_error: str | None = None  # text of the newest failed commit
    failures: int = 0  # failed commits since the table last committed
    retry_at: float = 0.0  # earliest time of the next commit attempt

    @property
    def healthy(self) -> bool:
        """Nothing parked and no failure recorded: commit as usual."""
        return self.parked_rows == 0 and self.failing_since is None


HEALTHY = TableState()


def decide(
    state: TableState,
    *,
    has_rows: bool,
    now: float,
    committed: bool | None = None,
    parked: bool | None = None,
) -> Step:
    """The next step for a table in ``state`` with (``has_rows``) or without rows in this batch.

    ``committed`` is the outcome of this batch's commit attempt (None: none made yet), ``parked``
    that of its park attempt. See the module docstring for the table.
    """
    if parked is not None:
        return Step.DONE if parked else Step.FAIL_BATCH
    if committed is not None:
        return Step.DONE if committed or not has_rows else Step.PARK
    if state.healthy:
        return Step.COMMIT if has_rows else Step.DONE
    if now >= state.retry_at:
        return Step.RETRY_PARKED
    return Step.PARK if has_rows else Step.DONE


def after_commit(state: TableState, *, ok: bool, now: float, retry_interval: float, error: str | None = None) -> TableState:
    """The state after a commit attempt (``ok``: every parked row and the batch's rows are in
    the table, and the job has removed the parked files)."""
    if ok:
        return HEALTHY
    return dataclasses.replace(
        state,
        failing_since=state.failing_since if state.failing_since is not None else now,
        last_error=error,
        failures=state.failures + 1,
        retry_at=now + retry_interval,
    )


def after_park(state: TableState, rows: int) -> TableState:
    """The state after ``rows`` more rows were parked."""
    return dataclasses.replace(state, parked_rows=state.parked_rows + rows)
