"""Figures sampled over a sliding window of time, for the console's live charts. Pure.

:class:`FigureSeries` keeps the last ``window_s / interval_s`` samples (one per :meth:`add`) of
any number of named figures: one timestamp ring and, per name, a ring of doubles (8 bytes a
sample: 720 samples of an hour at 5 s are under 6 KiB a figure, whatever the traffic). A name
not given to an :meth:`add` gets no value there (NaN: a gap in its chart); a name that had no
value for a whole window is forgotten, so figures of deleted topics and subscriptions go away.

Counters become rates with :meth:`rates`: the increase per second between two samples in a row;
a counter that went down (its process restarted) counts from 0 again. Not thread-safe: one
sampling thread adds, readers take copies under the owner's lock (connectors/http/console_sampler.py).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping

Point = tuple[float, float]  # (seconds since the epoch, value)


class FigureSeries:
    """A window of samples of named figures (see the module docstring)."""

    def __init__(self, window_s: float, interval_s: float) -> None:
        if interval_s <= 0 or window_s < interval_s:
            raise ValueError(f"window {window_s} s must hold at least one interval of {interval_s} s")
        self.capacity = int(math.ceil(window_s / interval_s)) + 1
        self._times = array("d", [math.nan] * self.capacity)
        self._values: dict[str, array[float]] = {}
        self._last_seen: dict[str, int] = {}  # name -> sample number it last had a value in
        self._count = 0  # samples added so far

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def names(self) -> list[str]:
        """The figures held, sorted."""
        return sorted(self._values)

    def add(self, at: float, values: Mapping[str, float]) -> None:
        """One sample taken at ``at``: ``values`` of the figures sampled (others get a gap)."""
        slot = self._count % self.capacity
        self._times[slot] = at
        for ring in self._values.values():
            ring[slot] = math.nan
        for name, value in values.items():
            if name not in self._values:
                self._values[name] = array("d", [math.nan] * self.capacity)
            self._values[name][slot] = float(value)
            self._last_seen[name] = self._count
        gone = [n for n, seen in self._last_seen.items() if self._count - seen >= self.capacity]
        for name in gone:
            del self._values[name], self._last_seen[name]
        self._count += 1

    def points(self, name: str) -> list[Point]:
        """``name``'s samples, oldest first, gaps left out (empty when unknown)."""
        ring = self._values.get(name)
        if ring is None:
            return []
        out = []
        for i in range(self._count - len(self), self._count):
            value = ring[i % self.capacity]
            if not math.isnan(value):
                out.append((self._times[i % self.capacity], value))
        return out

    def _rate(self, ring: array[float], i: int) -> float | None:
        """The per-second increase of ``ring`` from sample ``i - 1`` to sample ``i`` (a decrease
        counts from 0: the counter restarted); None when either has no value."""
        prev, cur = ring[(i - 1) % self.capacity], ring[i % self.capacity]
        t0, t1 = self._times[(i - 1) % self.capacity], self._times[i % self.capacity]
        if math.isnan(prev) or math.isnan(cur) or t1 <= t0:
            return None
        return (cur - prev if cur >= prev else cur) / (t1 - t0)

    def rates(self, name: str) -> list[Point]:
        """Per-second increase of counter ``name`` between samples in a row that both have it,
        at the later one's time (a decrease counts from 0: the counter restarted)."""
        ring = self._values.get(name)
        if ring is None:
            return []
        out = []
        for i in range(self._count - len(self) + 1, self._count):
            rate = self._rate(ring, i)
            if rate is not None:
                out.append((self._times[i % self.capacity], rate))
        return out

    def summed_rates(self, names: list[str]) -> list[Point]:
        """The per-second rates of several counters (one figure counted by several processes:
        a topic's messages published through each member) added up sample by sample, where at
        least one of them has a rate. Each counter's own drop (its process restarted) or gap is
        its own: a member that goes away leaves the others' rates as they were."""
        total: dict[float, float] = {}
        for name in names:
            for at, rate in self.rates(name):
                total[at] = total.get(at, 0.0) + rate
        return sorted(total.items())

    def latest_rate(self, name: str) -> float:
        """The rate between the last two samples, as :meth:`rates` computes it (0.0 when either
        lacks ``name``, or before two samples)."""
        ring = self._values.get(name)
        if ring is None or len(self) < 2:
            return 0.0
        rate = self._rate(ring, self._count - 1)
        return 0.0 if rate is None else rate
