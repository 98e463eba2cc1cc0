r"""Service metrics: the front end's counters and the Prometheus text exposition; pure.

:class:`Counters` holds monotonic counts by ``(name, topic, subscription)``. Threading contract:
the reactor thread is the only writer (``inc`` is a dict read and store of plain ints, each
atomic under the GIL); readers on other threads (the HTTP endpoint) take :meth:`Counters.snapshot`,
a ``dict.copy()`` — one C call that cannot see the dict half-resized — so a scrape sees every
counter at some value it really had, never a torn one. Counts start at 0 when the process starts
(Prometheus treats a restart as a counter reset).

:func:`render` writes metric families in the Prometheus text exposition format 0.0.4
(``# HELP``/``# TYPE`` lines, then ``name{label="value"} number`` samples; label values escape
``\``, ``"`` and newlines).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Counter names kept by the front end (Counters); exposed as sharedsub_<name>_total.
PUBLISHED = "published"  # by topic: messages committed to the topic table
DELIVERED = "delivered"  # by subscription: transfers sent to consumer links (redeliveries included)
REDELIVERED = "redelivered"  # by subscription: transfers of a message sent before (or with failures)
ACKNOWLEDGED = "acknowledged"  # by subscription: accepted (or sent pre-settled)
DEAD_LETTERED = "dead_lettered"  # by subscription: moved to the dead-letter table
EXPIRED = "expired"  # by subscription: not delivered because ttl / absolute-expiry-time passed

COUNTER_HELP: dict[str, str] = {
    PUBLISHED: "Messages committed to the topic by this front end.",
    DELIVERED: "Messages sent to consumer links of the subscription (redeliveries included).",
    REDELIVERED: "Messages sent again to a consumer link after an earlier delivery or failed deliveries.",
    ACKNOWLEDGED: "Messages acknowledged (accepted, or sent pre-settled) by consumers of the subscription.",
    DEAD_LETTERED: "Messages moved to the subscription's dead-letter table (rejected, max_delivery_count).",
    EXPIRED: "Messages of the subscription not delivered because they expired.",
}

CounterKey = tuple[str, str, str]  # (name, topic, subscription key; "" for topic counters)


class Counters:
    """Monotonic counters (see the module docstring for the threading contract)."""

    def __init__(self) -> None:
        self._values: dict[CounterKey, int] = {}

    def inc(self, name: str, topic: str, subscription: str = "", n: int = 1) -> None:
        """Add ``n`` to counter ``name`` of ``topic`` (and ``subscription``). Writer thread only."""
        key = (name, topic, subscription)
        self._values[key] = self._values.get(key, 0) + n

    def snapshot(self) -> dict[CounterKey, int]:
        """A consistent copy of every counter (any thread)."""
        return self._values.copy()

    def value(self, name: str, topic: str, subscription: str = "") -> int:
        """One counter's current value (0 when never incremented)."""
        return self._values.get((name, topic, subscription), 0)


SUFFIX = "__suffix__"
"""A sample label that is not a label: the sample is named ``<family>_<value>`` (a histogram's
``_bucket``, ``_sum`` and ``_count`` samples)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Family:
    """One metric family: its samples are ``(labels, value)`` (see :data:`SUFFIX`)."""

    name: str
    kind: str  # counter | gauge | histogram
    help: str
    samples: tuple[tuple[Mapping[str, str], float], ...]


def counter_families(snapshot: Mapping[CounterKey, int]) -> list[Family]:
    """The families of a :meth:`Counters.snapshot`: ``sharedsub_<name>_total`` with label ``topic``
    (and ``subscription`` for subscription counters). Every known counter has a family, empty
    ones included, so a scraper sees its HELP and TYPE from the start."""
    by_name: dict[str, list[tuple[Mapping[str, str], float]]] = {name: [] for name in COUNTER_HELP}
    for (name, topic, sub), value in sorted(snapshot.items()):
        labels = {"topic": topic} if not sub else {"topic": topic, "subscription": sub}
        by_name.setdefault(name, []).append((labels, float(value)))
    return [
        Family(f"sharedsub_{name}_total", "counter", COUNTER_HELP.get(name, name), tuple(samples))
        for name, samples in by_name.items()
    ]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render(families: Iterable[Family]) -> str:
    """The Prometheus text exposition (format 0.0.4) of ``families``."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {family.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for labels, value in family.samples:
            suffix = labels.get(SUFFIX)
            name = f"{family.name}_{suffix}" if suffix else family.name
            text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items() if k != SUFFIX)
            lines.append(f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}")
    return "\n".join(lines) + "\n"


def gauge(name: str, help_text: str, samples: Sequence[tuple[Mapping[str, str], float]]) -> Family:
    """A gauge family."""
    return Family(name, "gauge", help_text, tuple(samples))


def counter(name: str, help_text: str, samples: Sequence[tuple[Mapping[str, str], float]]) -> Family:
    """A counter family (``name`` should end in ``_total``)."""
    return Family(name, "counter", help_text, tuple(samples))
