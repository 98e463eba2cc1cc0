"""Crash safety at chosen moments: SIGKILLs of ``sharedsub serve`` during table maintenance,
during replays, and several in a row right after restarts (tests/crash/scenarios.py).

Each test draws a seed (``SHAREDSUB_CRASH_SEED`` replays one), prints it and names it in every
failure message; the invariants are those of tests/crash/invariants.py.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from tests.crash import scenarios
from tests.crash.driver import passed, seed_for

pytestmark = pytest.mark.e2e

# Two kills, in two kinds of maintenance step drawn from the seed (scenarios.maintenance_run); each
# kill costs a restart and a completed maintenance run. A soak run sets more.
MAINTENANCE_KILLS = int(os.environ.get("SHAREDSUB_CRASH_MAINTENANCE_KILLS", "2"))
# Two restarts: one killed while its fan-out job starts, one once it has settled (restart_run
# alternates them); a soak run sets more.
RESTARTS = int(os.environ.get("SHAREDSUB_CRASH_RESTARTS", "2"))


@pytest.mark.timeout(900)  # about 1 minute measured on a quiet 2-core machine, 3 on one loaded by other test runs
def test_sigkill_during_maintenance_runs(tmp_path: Path) -> None:
    result = scenarios.maintenance_run(
        tmp_path / "data",
        seed=seed_for("maintenance crash run"),
        kills=MAINTENANCE_KILLS,
        logs_dir=tmp_path / "logs",
        progress=print,
    )
    report = passed(result)
    # The run did what it claims: maintenance deleted acknowledged rows and compacted files
    # between the kills, and every kill came while a run was in progress.
    lines = [
        line for name in sorted(os.listdir(tmp_path / "logs")) for line in (tmp_path / "logs" / name).read_text().splitlines()
    ]
    totals: collections.Counter[str] = collections.Counter()
    for counts in scenarios.parse_reports(lines):
        totals.update(counts)
    assert totals["acked_rows_deleted"] > 0 and totals["files_compacted"] > 0, f"{dict(totals)}\n{report}"
    assert len(result.kills) == MAINTENANCE_KILLS, report


@pytest.mark.timeout(900)  # about 1 minute measured on a quiet 2-core machine, 3 on one loaded by other test runs
def test_sigkill_during_replays(tmp_path: Path) -> None:
    result = scenarios.replay_run(
        tmp_path / "data", seed=seed_for("replay crash run"), logs_dir=tmp_path / "logs", progress=print
    )
    report = passed(result)
    # A replay was cut short by a kill and run again, replays were answered (one per round at
    # least) and re-delivered messages.
    cut = [r for r in result.log.replays if not r.answered]
    done = [r for r in result.log.replays if r.answered]
    assert cut, f"no replay was cut short: each was answered before its kill\n{report}"
    assert len(done) >= 3 and len(result.kills) == 2, report
    assert sum(r.reopened or 0 for r in done) > 0, report


@pytest.mark.timeout(900)  # about 1 minute measured on a quiet 2-core machine; a restart may take the startup bound
def test_every_restart_after_sigkill_under_load_comes_up(tmp_path: Path) -> None:
    result = scenarios.restart_run(
        tmp_path / "data", seed=seed_for("restart crash run"), restarts=RESTARTS, logs_dir=tmp_path / "logs", progress=print
    )
    report = passed(result)
    assert len(result.kills) == RESTARTS and all(k.recovered_after is not None for k in result.kills), report
