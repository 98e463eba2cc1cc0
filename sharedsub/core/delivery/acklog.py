"""What a subscription generation's ack log says: which messages are settled for good, and each
message's delivery count. Pure (values or Arrow in, values out); the one place the rule lives.

The ack log (``subscriptions/<key>/acks-g<gen>``, :data:`sharedsub.storage.schemas.ACK`) holds,
per message (``seq``), any number of rows:

* a *final* row — ``accepted``, ``dead-lettered``, ``expired`` (older logs: ``rejected``) — for
  each time the message was settled for good;
* a ``failed`` row for each failed delivery (modified delivery-failed, unsettled at link loss);
* a ``replayed`` row for each replay (:mod:`sharedsub.core.ops.replay`) that took the message back while
  it was settled.

Rows carry no usable order: a group commit gives its rows one ``acked_at``, and compaction
merges files. So the rule only counts:

=====================================================  ==========================================
question                                               answer
=====================================================  ==========================================
settled for good?                                      final rows > ``replayed`` rows
delivery count (the AMQP header's, before the next     ``failed`` rows + ``replayed`` rows
delivery)
=====================================================  ==========================================

It is correct because a replay writes its ``replayed`` row only for a message that is settled
at that moment (final rows = replayed rows + 1): the message is then open again until one more
final row, its re-acknowledgement, arrives. Duplicate final rows for one settlement cannot
happen (a message is settled once per delivery). A replayed message counts one more delivery,
so it goes out marked redelivered (first-acquirer false, delivery-count >= 1), also after a
restart; the replay counts towards ``max_delivery_count`` like a failed delivery.

Maintenance deletes every ack-log row at or below a subscription's ack watermark together with
the routed rows (sharedsub.runtime.maintenance): whole messages, so the counts of the rest are unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pyarrow as pa

from sharedsub.core.delivery.outcomes import AckOutcome, is_final


@dataclasses.dataclass(frozen=True, slots=True)
class AckState:
    """The meaning of one ack log."""

    settled: frozenset[int]  # seqs settled for good
    delivery_counts: dict[int, int]  # seq -> failed + replayed rows (seqs with a count only)


class AckCounter:
    """The rule applied row by row: feed rows with :meth:`add` in any order, read the state."""

    def __init__(self) -> None:
        self._balance: dict[int, int] = {}  # seq -> final rows - replayed rows
        self.delivery_counts: dict[int, int] = {}
        self.settled_count = 0

    def add(self, seq: int, outcome: str) -> None:
        """Count one ack-log row."""
        if outcome in (AckOutcome.REPLAYED, AckOutcome.FAILED):
            self.delivery_counts[seq] = self.delivery_counts.get(seq, 0) + 1
        if outcome == AckOutcome.FAILED:
            return
        before = self._balance.get(seq, 0)
        after = before + (-1 if outcome == AckOutcome.REPLAYED else 1 if is_final(outcome) else 0)
        self._balance[seq] = after
        self.settled_count += (after > 0) - (before > 0)

    def state(self) -> AckState:
        """What the rows so far say."""
        return AckState(frozenset(s for s, n in self._balance.items() if n > 0), dict(self.delivery_counts))


def ack_state(rows: Iterable[tuple[int, str]]) -> AckState:
    """:class:`AckState` of the ``(seq, outcome)`` rows of an ack log (any order)."""
    counter = AckCounter()
    for seq, outcome in rows:
        counter.add(seq, outcome)
    return counter.state()


def ack_state_of(table: pa.Table | None) -> AckState:
    """:func:`ack_state` of an Arrow ack log with ``seq`` and ``outcome`` columns (None: empty)."""
    if table is None or table.num_rows == 0:
        return AckState(frozenset(), {})
    return ack_state(zip(table.column("seq").to_pylist(), table.column("outcome").to_pylist(), strict=True))
