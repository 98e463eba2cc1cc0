"""The console's live figures: samples of the front end's counters and the subscriptions'
backlogs, taken every ``[server] console_refresh`` seconds on a daemon thread and kept for
``[server] console_window`` seconds (sharedsub.core.ops.figure_series holds them; about 6 KiB a
figure for an hour at 5 s).

What is sampled, per figure name:

* ``published:TOPIC`` — messages this front end committed to the topic (``/metrics``'
  ``sharedsub_published_total``, summed over the topic's counters);
* ``delivered:KEY``, ``acknowledged:KEY`` — sent to and acknowledged by consumers of the
  subscription on this front end;
* ``backlog:KEY`` — the subscription's backlog (routed, not settled for good: the whole cluster's,
  read from its tables), only while someone watches: a console request came in the last
  :data:`WATCHED_FOR` seconds. Computing backlogs reads every subscription table and ack log
  (two requests each on a bucket), so an unwatched console costs no store request at all; the
  backlog chart has a gap for the time nobody looked. The computation is the one ``/metrics``
  shares (at most every ``[server] metrics_backlog_interval``).

Counters are in-memory copies: sampling them costs no I/O whatever the traffic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.figure_series import FigureSeries, Point
from sharedsub.core.ops.metrics import ACKNOWLEDGED, DELIVERED, PUBLISHED
from sharedsub.runtime.operations import ServiceOperations

log = logging.getLogger(__name__)

WATCHED_FOR = 120.0  # seconds after a console request during which backlogs are sampled
_COUNTERS = {PUBLISHED: "published", DELIVERED: "delivered", ACKNOWLEDGED: "acknowledged"}

Backlogs = Callable[[], list[tuple[SubscriptionRecord, int, int]]]


class ConsoleSampler:
    """Samples figures for the console (module docstring). :meth:`start` starts its thread."""

    def __init__(
        self, ops: ServiceOperations, backlogs: Backlogs, *, interval: float, window: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._ops = ops
        self._backlogs = backlogs
        self.interval = interval
        self.window = window
        self._clock = clock
        self._series = FigureSeries(window, interval)
        self._lock = threading.Lock()
        self._watched_until = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Sample every ``interval`` seconds on a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="sharedsub-console-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the sampling thread."""
        self._stop.set()

    def watched(self) -> None:
        """A console request came: sample backlogs for the next :data:`WATCHED_FOR` seconds."""
        self._watched_until = time.monotonic() + WATCHED_FOR

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # a store that does not answer: a gap in the charts, not a dead thread
                log.warning("console sampler: a sample failed", exc_info=True)

    def sample(self) -> None:
        """Take one sample now (the thread calls this every interval)."""
        values: dict[str, float] = {}
        for (name, topic, key), value in self._ops.counters().items():
            prefix = _COUNTERS.get(name)
            if prefix is None:
                continue
            figure = f"{prefix}:{topic}" if name == PUBLISHED else f"{prefix}:{key}"
            values[figure] = values.get(figure, 0.0) + value
        if time.monotonic() < self._watched_until:
            for record, messages, _bytes in self._backlogs():
                values[f"backlog:{record.key}"] = float(messages)
        at = self._clock()
        with self._lock:
            self._series.add(at, values)

    def points(self, figure: str) -> list[Point]:
        """The samples of ``figure``, oldest first."""
        with self._lock:
            return self._series.points(figure)

    def rates(self, figure: str) -> list[Point]:
        """Per-second rates of counter ``figure``, oldest first."""
        with self._lock:
            return self._series.rates(figure)

    def latest_rate(self, figure: str) -> float:
        """The rate of counter ``figure`` over the last interval."""
        with self._lock:
            return self._series.latest_rate(figure)
