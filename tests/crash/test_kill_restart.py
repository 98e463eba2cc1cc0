"""Crash safety: SIGKILL the front end or the fan-out job at random moments under load, check the invariants.

One run of :func:`tests.crash.driver.crash_run` with ``SHAREDSUB_CRASH_KILLS`` kills (default 22,
about two thirds of them front-end kills) and a random seed (``SHAREDSUB_CRASH_SEED`` replays one); the
seed is printed and is in every failure message.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.crash.driver import FANOUT, FRONTEND, LATE, crash_run

pytestmark = pytest.mark.e2e

KILLS = int(os.environ.get("SHAREDSUB_CRASH_KILLS", "22"))


@pytest.mark.timeout(900)  # about 8 minutes measured on a 2-core machine shared with other test runs
def test_sigkill_front_end_and_fanout_under_load(tmp_path: Path) -> None:
    seed = int(os.environ.get("SHAREDSUB_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"crash run seed {seed}, {KILLS} kills")
    result = crash_run(tmp_path / "data", seed=seed, kills=KILLS, logs_dir=tmp_path / "logs", progress=print)
    report = result.report()
    print(report)
    assert not result.violations, f"{report}\n--- serve log tail ---\n{result.serve_log_tail}"
    # The run did what it claims: both kinds of kill, load flowing, the mid-run subscription used.
    kinds = [k.kind for k in result.kills]
    assert len(kinds) == KILLS and FRONTEND in kinds and FANOUT in kinds, report
    assert result.counts.get("accepted", 0) > 0 and result.counts.get(f"delivered:{LATE}", 0) > 0, report
