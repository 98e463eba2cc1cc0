"""When the fan-out job logs its routing batches at INFO: the first one, then one line per
:data:`SUMMARY_INTERVAL` for the batches since the last line (jobs/batch_report.py logs every
batch at DEBUG as well). I/O-free: the caller passes the time.

Under load the job routes ~14 micro-batches a second: an INFO line each, and the statistics file
written after each (sharedsub.storage.fanout_stats.WRITE_INTERVAL), were ~18% of the job's Python
CPU at 1k msg/s, and as many lines went into the service's log (bench/RESULTS.md, issue 43,
"three cuts per micro-batch").
"""

from __future__ import annotations

import dataclasses

# Seconds between two INFO lines of routing batches.
SUMMARY_INTERVAL = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class Line:
    """What one INFO line says: the batches since the previous line, over ``seconds``."""

    batches: int
    seconds: float
    messages: int
    committed: int  # rows committed to subscription tables
    slowest: float  # the longest batch, seconds


@dataclasses.dataclass(slots=True)
class Summary:
    """The routing batches since the last INFO line (one thread: the batch thread)."""

    interval: float = SUMMARY_INTERVAL
    logged_at: float | None = None  # the time of the last line (None: none yet)
    batches: int = 0
    messages: int = 0
    committed: int = 0
    slowest: float = 0.0

    def first(self) -> bool:
        """Whether no routing batch was added yet (the next one is logged whole, at INFO)."""
        return self.logged_at is None

    def add(self, now: float, messages: int, committed: int, seconds: float) -> Line | None:
        """Count a routing batch that ended at ``now`` (any monotonic clock); the line to log
        when one is due: None for the first batch (the caller logged it whole) and until
        ``interval`` has passed since the last line, then the batches since it, this one included."""
        if self.logged_at is None:
            self.logged_at = now
            return None
        self.batches += 1
        self.messages += messages
        self.committed += committed
        self.slowest = max(self.slowest, seconds)
        if now - self.logged_at < self.interval:
            return None
        line = Line(self.batches, now - self.logged_at, self.messages, self.committed, self.slowest)
        self.logged_at = now
        self.batches = self.messages = self.committed = 0
        self.slowest = 0.0
        return line
