"""Fuzz tier: print the run's seed (tests/fuzz/seed.py) so a failure can be replayed."""

from __future__ import annotations

from typing import Any

from tests.fuzz.seed import SEED


def pytest_report_header() -> str:
    return f"sharedsub fuzz seed: SHAREDSUB_FUZZ_SEED={SEED}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"sharedsub fuzz seed: SHAREDSUB_FUZZ_SEED={SEED} (set it to replay this run)")
