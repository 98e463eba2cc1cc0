"""Python's cyclic garbage collector, run on the reactor thread only.

A proton object's Python wrapper frees its C object in ``__del__`` (``pn_decref``). When the
wrapper sits in a reference cycle (an exception kept with its traceback, whose frames hold a
link or a delivery, say) only the cyclic collector frees it, and that runs in whichever thread
happens to allocate when a threshold is crossed: the suite's reactor-thread check
(connectors/amqp/wire/reactor_thread.py) caught ``pn_decref`` called from the committer's thread
that way, a proton call racing the reactor's own. So the front end turns the automatic
collector off once it serves and collects from a timer on the reactor, as often as CPython's
own trigger would (sharedsub.core.ops.gc_tuning.due_generation) but never elsewhere.

Something else may give automatic collection back: CPython 3.11's ``subprocess`` turns the
collector off around a fork with a ``preexec_fn`` and back on after it if it was on when the fork
began (the fan-out's child is started so, sharedsub.runtime.fanout_process). A fork that began
before :meth:`ReactorCollector.start` turned it on again behind the collector's back, and a full
run then caught ``pn_decref`` on the committer's thread. So the front end takes the collector over
before anything spawns (connectors/amqp/server.py ``run``), and every look turns automatic
collection off again if it finds it on.
"""

from __future__ import annotations

import gc
import logging
from typing import Protocol

from proton import Handler

from sharedsub.core.ops.gc_tuning import due_generation, next_look

log = logging.getLogger(__name__)

INTERVAL = 0.05
"""Seconds between two looks at the collector's counts while the process allocates (a look that
collects nothing costs a call to ``gc.get_count``, and a wake-up of the loop); an idle process
looks less often, down to once a second (sharedsub.core.ops.gc_tuning.next_look)."""


class Scheduler(Protocol):
    """What the collector needs of its loop: proton's ``schedule(delay, handler)``."""

    def schedule(self, delay: float, target: ReactorCollector) -> object:
        """Call ``target.on_timer_task(event)`` in ``delay`` seconds."""


class ReactorCollector(Handler):
    """A timer task on the reactor's loop: collects when a generation is due, then schedules
    itself again, sooner while the process allocates than while it is idle. :meth:`start` turns
    the automatic collector off (process-wide) and schedules the first look; :meth:`stop` turns
    it back on."""

    def __init__(self, loop: Scheduler, interval: float = INTERVAL) -> None:
        super().__init__()
        self._loop = loop
        self.interval = interval
        self.collections = [0, 0, 0]  # by generation (tests, diagnostics)
        self._thresholds: tuple[int, int, int] = gc.get_threshold()
        self._was_enabled = gc.isenabled()
        self.stopped = False
        self.taken_back = 0  # looks that found automatic collection on again (tests, diagnostics)
        self.next_in = interval  # seconds to the next look (sharedsub.core.ops.gc_tuning.next_look)
        self._young = 0  # the young count at the last look

    def start(self) -> None:
        """Take the collector over: no automatic collection from now on (on the reactor thread,
        once the thresholds are set: sharedsub.core.ops.gc_tuning.tune_for_serving)."""
        self._thresholds = gc.get_threshold()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._loop.schedule(self.interval, self)

    def on_timer_task(self, event: object) -> None:
        """Collect the due generation, if any; reschedule (unless stopped). Automatic collection
        found on (see the module's docstring) is turned off again first."""
        if self.stopped:
            return
        if gc.isenabled():
            gc.disable()
            self.taken_back += 1
            if self.taken_back == 1:
                log.warning("automatic garbage collection was turned on again; it is off (collected on the reactor only)")
        counts = gc.get_count()
        generation = due_generation(counts, self._thresholds)
        if generation is not None:
            try:
                gc.collect(generation)
            except Exception:  # a finalizer's error must not end the reactor
                log.exception("garbage collection failed")
            self.collections[generation] += 1
        grown = counts[0] - self._young
        self.next_in = next_look(self.next_in, base=self.interval, grown=grown, collected=generation is not None)
        self._young = gc.get_count()[0]
        self._loop.schedule(self.next_in, self)

    def stop(self, *, give_back: bool = True) -> None:
        """Stop collecting here; with ``give_back``, give the collector back to CPython. The
        service's stop sequence does not give it back: the committer may still be draining a
        large last group then (its stop waits at most 30 s), and a collection its allocations
        triggered would free proton wrappers on its thread (seen: pn_decref from the committer in
        a full run); the process ends soon after, with automatic collection off."""
        self.stopped = True
        if give_back and self._was_enabled:
            gc.enable()
