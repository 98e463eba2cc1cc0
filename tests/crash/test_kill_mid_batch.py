"""Exactly once per subscription table when a fan-out micro-batch that commits hundreds of
tables is cut short: SIGKILLs of ``sharedsub serve``, and of only its fan-out job (batches started
at commits: ``[fanout] start_on_commit``), while a batch has committed some of its tables and not
the others (tests/crash/batch_scenarios.py).

Each test draws a seed (``SHAREDSUB_CRASH_SEED`` replays one), prints it and names it in every
failure message; the invariants are those of tests/crash/invariants.py, with each subscription
owed exactly the messages its selector matches. Each also asserts that a kill really came in the
middle of a batch (read back from the tables after the run), so it cannot pass without having
tested that.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.crash import batch_scenarios
from tests.crash.driver import FANOUT, FRONTEND, passed, seed_for

pytestmark = pytest.mark.e2e

# Two kills per run: the job is frozen where its tables were seen mid-batch (BatchLoad.await_mid_batch),
# but a small first batch can be whole by then (seen in a full run: batch 1 routed 37 messages to
# 111 of 300 tables, all committed at the kill), so one kill alone may land between batches; each
# kill costs a Spark start; a soak run sets more.
KILLS = int(os.environ.get("SHAREDSUB_CRASH_BATCH_KILLS", "2"))


def _run(tmp_path: Path, kind: str, what: str, *, on_commit: bool = False) -> None:
    result = batch_scenarios.mid_batch_run(
        tmp_path / "data",
        seed=seed_for(what),
        kind=kind,
        kills=KILLS,
        logs_dir=tmp_path / "logs",
        progress=print,
        env={"SHAREDSUB_FANOUT_START_ON_COMMIT": "true"} if on_commit else None,
        before_stop=batch_scenarios.commit_listener_violations if on_commit else None,
    )
    passed(result.crash)
    report = result.report()
    print("\n".join(report.splitlines()[-KILLS - 1 :]))  # where each kill landed
    assert len(result.crash.kills) == KILLS and all(k.kind == kind for k in result.crash.kills), report
    assert result.tables == batch_scenarios.SUBSCRIPTIONS, report
    # Not vacuous: at least one kill came after some of a batch's table commits and before others.
    assert any(m.mid_batch for m in result.landed), f"no kill came in the middle of a batch\n{report}"


# Both: about 3 minutes each with two kills on a 2-core machine shared with other test runs (load 3
# to 6); the Spark starts (the first and one per kill) are most of it.
@pytest.mark.timeout(900)
def test_sigkill_of_serve_in_the_middle_of_a_batch_committing_hundreds_of_tables(tmp_path: Path) -> None:
    _run(tmp_path, FRONTEND, "mid-batch serve kill run")


# The job's own kill runs with batches started at commits ([fanout] start_on_commit: trigger 0, held
# latestOffset calls): a job killed while its source holds a call, or mid-batch, and its successor
# binding the commit signal again. The serve kill above covers the trigger grid's job dying mid-batch
# (the job dies with serve), and the random SIGKILL run kills the grid's job alone.
@pytest.mark.timeout(900)
def test_sigkill_of_the_fanout_job_started_at_commits_in_the_middle_of_a_batch_committing_hundreds_of_tables(
    tmp_path: Path,
) -> None:
    _run(tmp_path, FANOUT, "mid-batch fan-out kill run, batches started at commits", on_commit=True)
