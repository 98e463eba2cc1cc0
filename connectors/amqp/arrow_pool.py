"""Give the memory Arrow's allocator keeps back to the system, now and then, on the reactor thread.

pyarrow's default pool (mimalloc in the wheels used here) keeps the pages of freed buffers for
reuse, and the front end frees many: every topic-table read on a payload-cache miss, every tailer
read, every backlog figure. A soak measured serve's resident memory growing by what that pool
kept while almost nothing was allocated in it (bench/RESULTS.md, soak run 4). ``release_unused``
returns such pages; for mimalloc it acts on the calling thread's heap, and the thread that frees
most Arrow data here is the main thread, which runs the reactor: so it runs there, from a proton
timer, every :data:`INTERVAL` seconds (a call takes well under a millisecond when there is
nothing to give back).
"""

from __future__ import annotations

import logging
from typing import Protocol

import pyarrow as pa
from proton import Handler

log = logging.getLogger(__name__)

INTERVAL = 30.0
"""Seconds between two releases."""


class Scheduler(Protocol):
    """What the release needs of its loop: proton's ``schedule(delay, handler)``."""

    def schedule(self, delay: float, target: ArrowPoolRelease) -> object:
        """Call ``target.on_timer_task(event)`` in ``delay`` seconds."""


class ArrowPoolRelease(Handler):
    """A timer task: release the default pool's unused memory, then schedule itself again
    ``interval`` seconds later on ``loop`` (anything with proton's ``schedule(delay, handler)``:
    the front end's connectors.amqp.wire.engine_loop.EngineLoop). Start it with
    ``loop.schedule(interval, it)``."""

    def __init__(self, loop: Scheduler, interval: float = INTERVAL) -> None:
        super().__init__()
        self._loop = loop
        self.interval = interval
        self.releases = 0
        self.stopped = False

    def on_timer_task(self, event: object) -> None:
        """Release, count, reschedule (unless :meth:`stop` was called)."""
        if self.stopped:
            return
        try:
            pa.default_memory_pool().release_unused()
        except Exception:  # never let housekeeping end the reactor
            log.exception("releasing Arrow's unused memory failed")
        self.releases += 1
        self._loop.schedule(self.interval, self)

    def stop(self) -> None:
        """Do not schedule again (the stop sequence: the reactor must be able to end)."""
        self.stopped = True
