"""sharedsub.core.value_type: a frozen dataclass to the type checker and in equality and hashing,
a plain slotted one at run time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sharedsub.core.delivery.dispatch import CountSent, Release, Send
from sharedsub.core.delivery.outcomes import Ack, AckOutcome
from sharedsub.core.value_type import value_type

PROJECT = Path(__file__).resolve().parents[2]


@value_type
class _Pair:
    left: int
    right: str = "r"


def test_equality_and_hash_are_by_class_and_field_values() -> None:
    assert _Pair(1) == _Pair(1, "r") and hash(_Pair(1)) == hash(_Pair(1, "r"))
    assert _Pair(1) != _Pair(2)
    assert CountSent(1) != Release(frozenset({1}))  # type: ignore[comparison-overlap]
    assert Ack(AckOutcome.ACCEPTED) in {Ack(AckOutcome.ACCEPTED)}
    assert len({Send(1, "row", 0, True, False), Send(1, "row", 0, True, False)}) == 1


def test_slotted_without_a_dict() -> None:
    assert not hasattr(_Pair(1), "__dict__")


def test_the_type_checker_refuses_assigning_a_field(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            """
            from sharedsub.core.delivery.dispatch import CountSent

            sent = CountSent(3)
            sent.count = 4
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(probe)],
        cwd=PROJECT, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1 and 'Property "count" defined in "CountSent" is read-only' in run.stdout, run.stdout
