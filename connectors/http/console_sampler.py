"""The console's live figures: samples of the front ends' counters and the subscriptions'
backlogs, taken every ``[server] console_refresh`` seconds on a daemon thread and kept for
``[server] console_window`` seconds (sharedsub.core.ops.figure_series holds them; about 6 KiB a
figure for an hour at 5 s).

What is sampled, per figure name:

* ``published:TOPIC@SLOT`` — messages member ``SLOT`` committed to the topic (``/metrics``'
  ``sharedsub_published_total``, summed over the topic's counters; slot 0 on a local data dir);
* ``delivered:KEY@SLOT`` — sent to consumers of the subscription on member ``SLOT``;
* ``backlog:KEY`` — the subscription's backlog (routed, not settled for good: the whole cluster's,
  read from its tables).

This member's counters are in-memory copies: sampling them costs no I/O whatever the traffic, so
they are sampled always. The rest only while someone watches (a console request came in the last
:data:`WATCHED_FOR` seconds), because it costs requests: backlogs read every subscription table
and ack log (two requests each on a bucket; the computation ``/metrics`` shares, at most every
``[server] metrics_backlog_interval``), and the other live members' counters are one HTTP request
to each (``GET /console/api/counters``, open like ``/metrics``) after a reading of the members'
leases. An unwatched console makes no request at all; its charts have gaps for the time nobody
looked, and rates of other members start when a console opens.

Every counter of every member, as the last sample found it, is kept too (:meth:`counters`: the
subscription page's counts). Rates of a figure counted by several members add up member by member
(:meth:`FigureSeries.summed_rates`), so a member that dies or restarts leaves no dip or spike.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping

from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.figure_series import FigureSeries, Point
from sharedsub.core.ops.metrics import DELIVERED, PUBLISHED, CounterKey
from sharedsub.runtime.operations import ServiceOperations

log = logging.getLogger(__name__)

WATCHED_FOR = 120.0  # seconds after a console request during which backlogs are sampled
_COUNTERS = {PUBLISHED: "published", DELIVERED: "delivered"}  # the counters charted as rates

Backlogs = Callable[[], list[tuple[SubscriptionRecord, int, int]]]
Peers = Callable[[], list[tuple[int, str]]]  # (slot, HTTP base URL) of the other live members
PEER_TIMEOUT = 2.0  # seconds a member's counters may take to come


@dataclasses.dataclass(frozen=True, slots=True)
class MemberFigures:
    """What another member's ``GET /console/api/counters`` tells: its counters, and the ids of
    its AMQP connections (which the catalog's link events name: whose consumer a link is)."""

    counters: Mapping[CounterKey, int]
    connections: frozenset[str]


FetchCounters = Callable[[str], MemberFigures]  # a member's figures, from its HTTP base URL


def fetch_counters(base_url: str) -> MemberFigures:
    """Member ``base_url``'s figures (``GET /console/api/counters``).

    Raises:
        OSError: it did not answer in :data:`PEER_TIMEOUT` seconds, or not with 200.
        ValueError, KeyError, TypeError: its answer is not the counters document.
    """
    with urllib.request.urlopen(f"{base_url}/console/api/counters", timeout=PEER_TIMEOUT) as reply:
        document = json.loads(reply.read())
    counters = {(str(n), str(t), str(k)): int(v) for n, t, k, v in document["counters"]}
    return MemberFigures(counters, frozenset(str(c) for c in document["connections"]))


class ConsoleSampler:
    """Samples figures for the console (module docstring). :meth:`start` starts its thread."""

    def __init__(
        self, ops: ServiceOperations, backlogs: Backlogs, *, interval: float, window: float,
        peers: Peers = lambda: [], fetch: FetchCounters = fetch_counters, clock: Callable[[], float] = time.time,
    ) -> None:
        self._ops = ops
        self._backlogs = backlogs
        self._peers = peers
        self._fetch = fetch
        self.interval = interval
        self.window = window
        self._clock = clock
        self._series = FigureSeries(window, interval)
        self._members_of: dict[str, set[str]] = {}  # figure -> its names per member (figure@slot)
        self._peer_figures: dict[int, MemberFigures] = {}  # the last sample's, by slot
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
        member = self._ops.member()
        values: dict[str, float] = {}
        self._add_counters(values, self._ops.counters(), int(member["slot"]) if member else 0)  # type: ignore[call-overload]
        peer_figures: dict[int, MemberFigures] = {}
        if time.monotonic() < self._watched_until:
            for record, messages, _bytes in self._backlogs():
                values[f"backlog:{record.key}"] = float(messages)
            for slot, url in self._peers():
                try:
                    peer_figures[slot] = self._fetch(url)
                except (OSError, ValueError, KeyError, TypeError) as exc:  # a member going or gone: a gap
                    log.debug("console sampler: no counters from member %d (%s): %s", slot, url, exc)
                    continue
                self._add_counters(values, peer_figures[slot].counters, slot)
        at = self._clock()
        with self._lock:
            self._peer_figures = peer_figures
            for name in values:
                figure = name.rpartition("@")[0]
                if figure:
                    self._members_of.setdefault(figure, set()).add(name)
            self._series.add(at, values)
            known = set(self._series.names())
            for figure, names in list(self._members_of.items()):
                names &= known
                if not names:
                    del self._members_of[figure]

    @staticmethod
    def _add_counters(values: dict[str, float], counters: Mapping[CounterKey, int], slot: int) -> None:
        for (name, topic, key), value in counters.items():
            prefix = _COUNTERS.get(name)
            if prefix is None:
                continue
            figure = f"{prefix}:{topic}@{slot}" if name == PUBLISHED else f"{prefix}:{key}@{slot}"
            values[figure] = values.get(figure, 0.0) + value

    def points(self, figure: str) -> list[Point]:
        """The samples of ``figure`` (a backlog), oldest first."""
        with self._lock:
            return self._series.points(figure)

    def rates(self, figure: str) -> list[Point]:
        """Per-second rates of counter ``figure`` (``published:TOPIC``, ``delivered:KEY``, …),
        every member's added up, oldest first."""
        with self._lock:
            return self._series.summed_rates(sorted(self._members_of.get(figure, ())))

    def latest_rate(self, figure: str) -> float:
        """The rate of counter ``figure`` over the last interval, every member's added up."""
        with self._lock:
            return sum(self._series.latest_rate(n) for n in self._members_of.get(figure, ()))

    def counters(self) -> dict[CounterKey, int]:
        """Every counter added up over this member (now) and the other members (as the last
        sample found them: none while nobody watches)."""
        with self._lock:
            peers = list(self._peer_figures.values())
        out = dict(self._ops.counters())
        for figures in peers:
            for key, value in figures.counters.items():
                out[key] = out.get(key, 0) + value
        return out

    def member_of(self, connection: str) -> int | None:
        """The slot of the other member that holds AMQP connection ``connection``, as the last
        sample found it (None: none of them, or nobody watched)."""
        with self._lock:
            return next((slot for slot, f in self._peer_figures.items() if connection in f.connections), None)
