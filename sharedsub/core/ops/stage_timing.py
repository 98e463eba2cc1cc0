"""Where a message's time goes: one histogram per stage of the message path; pure.

Stages of the front end (``sharedsub serve`` / ``frontend``), each observed where it happens:

=====================  ==========================================================================
``decode``             reactor: a published transfer decoded, checked and queued (per message)
``commit_wait``        committer: a request's wait in the committer's queue (per group commit)
``group_commit``       committer: one topic append of a group commit, fsync included (per topic)
``publish_accept``     a message received → its publisher settled accepted (per message)
``ack_commit``         committer: one ack-log append (per subscription table and group)
``tail_read``          tailer: one read of new rows of a subscription table (per read)
``tail_visible``       a row's commit to its subscription table → the tailer read it (per read, oldest row)
``dispatch_wait``      rows read by the tailer → the reactor took them up (per read)
``publish_to_send``    a message's topic commit → its transfer to a consumer (per transfer)
=====================  ==========================================================================

Stages of the fan-out job (recorded by jobs/batch_report.py into its stats file, sharedsub.storage.
fanout_stats, and exposed by the same endpoint): ``fanout_source_read`` (a micro-batch's topic
rows read), ``fanout_route`` (bindings and selectors evaluated), ``fanout_commit`` (subscription
tables committed), ``fanout_batch`` (the whole batch), ``fanout_between_batches`` (the gap before
a batch whose messages were waiting when the previous one ended: Spark's own work between
batches) and ``fanout_wait`` (the oldest message of a
batch: its topic commit → the batch started).

Threading contract: each stage has one writer thread (the table above); :meth:`Histogram.observe`
does plain int/float updates of a list, and readers take :meth:`StageTimes.snapshot`, copies made
by single C calls, so a scrape may see a count one observation ahead of its sum, never a torn
list. Buckets are fixed (:data:`BUCKETS`, seconds), the same for every stage, so histograms from
two processes and two scrapes can be added and subtracted (bench/ prints the difference between
the scrapes before and after a measured window).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence

from sharedsub.core.ops.metrics import SUFFIX, Family

BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)
"""Upper bounds (seconds) of the buckets; a last, unbounded one (+Inf) follows."""

STAGE_HELP: dict[str, str] = {
    "decode": "A published transfer decoded, checked and queued for the committer (reactor thread).",
    "commit_wait": "A request's wait in the committer's queue before its group commit started.",
    "group_commit": "One topic append of a group commit, fsync included.",
    "publish_accept": "A published message received until its publisher was settled accepted.",
    "ack_commit": "One append of acknowledgements to a subscription's ack log.",
    "tail_read": "One read of new rows of a subscription table by the tailer.",
    "tail_visible": "The oldest row of a tailer read: its commit to the subscription table until read.",
    "dispatch_wait": "Rows read by the tailer until the reactor thread took them up.",
    "publish_to_send": "A message's commit to its topic until its transfer to a consumer link.",
    "fanout_source_read": "Fan-out job: a micro-batch's topic rows read.",
    "fanout_route": "Fan-out job: bindings and selectors of a micro-batch evaluated.",
    "fanout_commit": "Fan-out job: a micro-batch's subscription tables committed.",
    "fanout_batch": "Fan-out job: one micro-batch, end to end.",
    "fanout_wait": "Fan-out job: the oldest message of a micro-batch, its topic commit until the batch started.",
    "fanout_between_batches": (
        "Fan-out job: from the end of one micro-batch to the start of the next, when the next one's "
        "messages were already waiting (Spark's own work between batches)."
    ),
}
"""Every stage, with its help text (the metric family of each is listed even before it is seen)."""


class Histogram:
    """Counts per bucket of :data:`BUCKETS` (plus +Inf), the sum and the count of observations."""

    __slots__ = ("counts", "total")

    def __init__(self, counts: Sequence[int] | None = None, total: float = 0.0) -> None:
        self.counts: list[int] = list(counts) if counts is not None else [0] * (len(BUCKETS) + 1)
        self.total = total

    def observe(self, seconds: float) -> None:
        """Count one observation (negative values, from clocks of two machines, count as 0)."""
        seconds = max(seconds, 0.0)
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds

    @property
    def count(self) -> int:
        """Observations so far."""
        return sum(self.counts)

    def copy(self) -> Histogram:
        """An independent copy."""
        return Histogram(self.counts.copy(), self.total)

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since ``earlier`` (a copy of this histogram taken before)."""
        return Histogram([a - b for a, b in zip(self.counts, earlier.counts, strict=True)], self.total - earlier.total)

    def plus(self, other: Histogram) -> Histogram:
        """Both histograms' observations."""
        return Histogram([a + b for a, b in zip(self.counts, other.counts, strict=True)], self.total + other.total)

    def quantile(self, q: float) -> float | None:
        """An estimate of quantile ``q`` (0..1): linear within the bucket it falls in, as
        Prometheus' ``histogram_quantile`` does; None without observations. Past the last
        bound, the last bound."""
        n = self.count
        if n == 0:
            return None
        rank = q * n
        seen = 0
        for i, c in enumerate(self.counts):
            if c and seen + c >= rank:
                if i == len(BUCKETS):
                    return BUCKETS[-1]
                low = BUCKETS[i - 1] if i else 0.0
                return low + (BUCKETS[i] - low) * max(rank - seen, 0.0) / c
            seen += c
        return BUCKETS[-1]

    def to_json(self) -> dict[str, object]:
        """``{"counts": [...], "sum": s}`` (the bounds are :data:`BUCKETS`)."""
        return {"counts": self.counts.copy(), "sum": self.total}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Histogram | None:
        """Inverse of :meth:`to_json`; None for a document of other buckets or a broken one."""
        counts = doc.get("counts")
        total = doc.get("sum")
        if not isinstance(counts, list) or len(counts) != len(BUCKETS) + 1 or not isinstance(total, (int, float)):
            return None
        if not all(isinstance(c, int) and c >= 0 for c in counts):
            return None
        return cls(counts, float(total))


class StageTimes:
    """One :class:`Histogram` per stage name (created on first use)."""

    def __init__(self) -> None:
        self._stages: dict[str, Histogram] = {}

    def observe(self, stage: str, seconds: float) -> None:
        """Count ``seconds`` in ``stage`` (its writer thread only; see the module docstring)."""
        hist = self._stages.get(stage)
        if hist is None:
            hist = self._stages[stage] = Histogram()
        hist.observe(seconds)

    def snapshot(self) -> dict[str, Histogram]:
        """Copies of every stage's histogram (any thread)."""
        return {name: hist.copy() for name, hist in self._stages.copy().items()}

    def to_json(self) -> dict[str, dict[str, object]]:
        """Every stage as :meth:`Histogram.to_json`."""
        return {name: hist.to_json() for name, hist in self.snapshot().items()}


def stages_from_json(doc: object) -> dict[str, Histogram]:
    """The histograms of a :meth:`StageTimes.to_json` document (broken entries skipped)."""
    if not isinstance(doc, Mapping):
        return {}
    out = {}
    for name, entry in doc.items():
        hist = Histogram.from_json(entry) if isinstance(entry, Mapping) else None
        if hist is not None:
            out[str(name)] = hist
    return out


def stage_family(stages: Mapping[str, Histogram]) -> Family:
    """``sharedsub_stage_seconds{stage=...}``, one histogram family over every stage of
    :data:`STAGE_HELP` (stages not seen yet have zero counts) and any other stage given."""
    samples: list[tuple[Mapping[str, str], float]] = []
    for name in [*STAGE_HELP, *sorted(set(stages) - set(STAGE_HELP))]:
        hist = stages.get(name) or Histogram()
        running = 0
        for bound, c in zip([*BUCKETS, float("inf")], hist.counts, strict=True):
            running += c
            samples.append(({"stage": name, "le": _le(bound), SUFFIX: "bucket"}, float(running)))
        samples.append(({"stage": name, SUFFIX: "sum"}, hist.total))
        samples.append(({"stage": name, SUFFIX: "count"}, float(running)))
    return Family(
        "sharedsub_stage_seconds",
        "histogram",
        "Time spent in each stage of the message path (stage label; sharedsub.core.ops.stage_timing lists them).",
        tuple(samples),
    )


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def merged(*parts: Iterable[tuple[str, Histogram]]) -> dict[str, Histogram]:
    """Stage histograms of several sources, added up per stage."""
    out: dict[str, Histogram] = {}
    for part in parts:
        for name, hist in part:
            out[name] = out[name].plus(hist) if name in out else hist.copy()
    return out
