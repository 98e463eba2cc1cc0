"""Log a lasting fault once, not on every poll: when it starts, at most once per interval while
it lasts (with how many occurrences were not logged), and once when it clears.

Loops that poll (the tailer every few milliseconds, the fan-out every micro-batch, the front end
reading the fan-out's statistics) meet the same fault again and again while it lasts; logging
each occurrence floods the log and hides everything else. :class:`FaultRule` decides which
occurrences are logged and is pure (the caller passes the clock), so its table test runs over a
fake clock; :class:`ThrottledLog` applies it to a :class:`logging.Logger`.

A fault is named by a key the caller chooses (e.g. the table path): faults of different keys
are throttled independently. Contracts of :class:`FaultRule`:

* The first occurrence of a key that is not failing is logged (``start``).
* Later occurrences are logged only once ``every`` seconds have passed since the last logged
  line of that key (``repeat``, with the number of occurrences not logged since that line).
* :meth:`FaultRule.cleared` on a failing key is logged (``clear``, with the fault's duration and
  the occurrences not logged since the last line); on a key that is not failing it is nothing,
  so callers may call it after every successful poll.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Hashable
from typing import Literal

# At most one line per fault per this many seconds while it lasts.
DEFAULT_EVERY = 300.0


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    """One line to log for a fault."""

    kind: Literal["start", "repeat", "clear"]
    suppressed: int  # occurrences since the previous line of this fault that were not logged
    since: float  # when the fault started (the caller's clock)
    lasted: float  # seconds from its start to now


@dataclasses.dataclass(slots=True)
class _Fault:
    since: float
    logged_at: float
    suppressed: int = 0


class FaultRule:
    """Which occurrences of recurring faults to log (see the module docstring); pure."""

    def __init__(self, every: float = DEFAULT_EVERY) -> None:
        self.every = every
        self._faults: dict[Hashable, _Fault] = {}

    def occurred(self, key: Hashable, now: float) -> Line | None:
        """The fault ``key`` happened (again) at ``now``: the line to log, or None."""
        fault = self._faults.get(key)
        if fault is None:
            self._faults[key] = _Fault(since=now, logged_at=now)
            return Line("start", 0, now, 0.0)
        if now - fault.logged_at >= self.every:
            line = Line("repeat", fault.suppressed, fault.since, now - fault.since)
            fault.logged_at, fault.suppressed = now, 0
            return line
        fault.suppressed += 1
        return None

    def cleared(self, key: Hashable, now: float) -> Line | None:
        """``key`` works again at ``now``: the line to log if it was failing, else None."""
        fault = self._faults.pop(key, None)
        if fault is None:
            return None
        return Line("clear", fault.suppressed, fault.since, now - fault.since)

    def failing(self, key: Hashable) -> bool:
        """True while ``key`` has a fault that has not cleared."""
        return key in self._faults

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s state without a line (its subject went away, e.g. a deleted table)."""
        self._faults.pop(key, None)


class ThrottledLog:
    """A :class:`FaultRule` applied to ``logger``. One thread at a time (each polling loop owns
    one)."""

    def __init__(
        self,
        logger: logging.Logger,
        every: float = DEFAULT_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.rule = FaultRule(every)
        self._clock = clock

    def fault(
        self,
        key: Hashable,
        message: str,
        *args: object,
        error: BaseException | None = None,
        level: int = logging.ERROR,
    ) -> bool:
        """Log ``message % args`` if the rule says so; return whether a line was written.

        The first line of a fault carries ``error``'s traceback; repeats carry only its text,
        how long the fault lasts and how many occurrences were not logged.
        """
        line = self.rule.occurred(key, self._clock())
        if line is None:
            return False
        if line.kind == "start":
            self.logger.log(level, message, *args, exc_info=error)
        else:
            self.logger.log(
                level,
                message + " (still failing after %.0f s; %d repeats not logged)%s",
                *args,
                line.lasted,
                line.suppressed,
                f": {_text(error)}" if error is not None else "",
            )
        return True

    def clear(self, key: Hashable, message: str, *args: object, level: int = logging.INFO) -> bool:
        """Log ``message % args`` if ``key`` was failing (it works again); return whether it was."""
        line = self.rule.cleared(key, self._clock())
        if line is None:
            return False
        self.logger.log(
            level, message + " (after %.0f s; %d repeats not logged)", *args, line.lasted, line.suppressed
        )
        return True

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s fault without a line."""
        self.rule.forget(key)


def _text(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
