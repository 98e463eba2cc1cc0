"""``value_type``: the class decorator of the small immutable values made for every message
(dispatch events and effects, settlement decisions, rows on their way to a consumer).

To the type checker a ``@value_type`` class is a frozen dataclass: ``mypy`` refuses an assignment
to its fields (tests/unit/test_static_checks.py runs it over every shipped package). At run time it is a
slotted dataclass whose ``__init__`` sets its fields directly: a frozen dataclass's ``__init__``
goes through ``object.__setattr__`` for each field, 0.47 µs for six fields against 0.11 µs
(timeit, 1M constructions, this project's 2-core machine), and a consumed message makes about six
of them on the front end's event loop — 11.5% of that thread's time holding the interpreter lock
(py-spy --gil, one consumer draining a backlog; bench/RESULTS.md, "Cost per message (issue 31),
session 9").

Equality and hashing are a frozen dataclass's (``eq`` and ``unsafe_hash``: by field values, the
class included). Values that are not made per message keep ``dataclasses.dataclass(frozen=True)``.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def value_type(cls: type[T]) -> type[T]:
    """``cls`` as a slotted dataclass, frozen to the type checker (module docstring)."""
    return dataclasses.dataclass(slots=True, unsafe_hash=True)(cls)
