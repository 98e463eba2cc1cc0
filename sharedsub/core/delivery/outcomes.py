"""What happens to a delivered message once its delivery ends: the pure rule of docs/design.md §5.

The front end translates a consumer's disposition (or the loss of its link) into a
:class:`Settlement`, calls :func:`decide` with the message's current delivery count and the
configured :class:`Limits`, and applies the :class:`Decision`:

======================================  ==========================================================
settlement                              decision
======================================  ==========================================================
accepted (or settled with no outcome)   ``Ack("accepted")``: acknowledged for good
released                                ``Requeue(count)``: count unchanged, any link
modified(delivery-failed)               ``Requeue(count + 1)``
modified(undeliverable-here)            ``Requeue(count, exclude_link=True)``: another link
modified(both)                          ``Requeue(count + 1, exclude_link=True)``
rejected                                ``DeadLetter("rejected")``, never redelivered
link lost (detach / end / close)        ``Requeue(count + 1)``: a failed delivery
======================================  ==========================================================

A failed delivery (modified with delivery-failed, or unsettled when its link went away) that
brings the count to ``max_delivery_count`` becomes ``DeadLetter("max-delivery-count")``
instead. ``max_delivery_count = 0`` means no limit.

Expiry: :func:`expires_at` gives the instant (ms since the epoch) after which a message must not
be delivered: the earlier of ``published_at + ttl`` (the AMQP header ttl counts from when the
broker received the message, which is its commit time) and ``absolute-expiry-time``.

No I/O, no proton: the decision table is tested in tests/unit/test_outcomes.py.
"""

from __future__ import annotations

import dataclasses
import enum

from sharedsub.core.value_type import value_type


class Settlement(enum.StrEnum):
    """How a delivery ended, protocol-neutral."""

    ACCEPTED = "accepted"
    RELEASED = "released"
    MODIFIED = "modified"
    REJECTED = "rejected"
    LINK_LOST = "link-lost"  # still unsettled when its link, session or connection went away


class AckOutcome(enum.StrEnum):
    """The ``outcome`` column of the acknowledgement log (schemas.ACK).

    Every value but ``FAILED`` and ``REPLAYED`` settles the message for good (it is never
    delivered again); ``FAILED`` rows only count failed deliveries, so the delivery count
    survives a restart; a ``REPLAYED`` row takes one settlement back (a replay, sharedsub.core.ops.replay).
    How the rows combine is :mod:`sharedsub.core.delivery.acklog`.
    """

    ACCEPTED = "accepted"
    DEAD_LETTERED = "dead-lettered"
    EXPIRED = "expired"
    FAILED = "failed"
    REPLAYED = "replayed"


def is_final(outcome: str) -> bool:
    """True when an ack-log ``outcome`` settles the message for good (every outcome but
    ``failed`` and ``replayed``; logs written before dead-lettering existed say ``rejected``).
    Whether the message *is* settled depends on all its rows: :func:`sharedsub.core.delivery.acklog.ack_state`."""
    return outcome not in (AckOutcome.FAILED, AckOutcome.REPLAYED)


class DeadLetterReason(enum.StrEnum):
    """The ``reason`` column of the dead-letter table (schemas.DEAD_LETTER)."""

    REJECTED = "rejected"
    MAX_DELIVERY_COUNT = "max-delivery-count"


@dataclasses.dataclass(frozen=True, slots=True)
class Limits:
    """Delivery limits (``[delivery]`` settings). ``max_delivery_count`` 0 = unlimited."""

    max_delivery_count: int = 10


@value_type
class Ack:
    """Settled for good; record ``outcome`` in the ack log."""

    outcome: AckOutcome


@value_type
class Requeue:
    """Back to the subscription with ``delivery_count``; ``exclude_link``: not to the same link.

    ``failed`` says the delivery counted as failed (record it so the count survives a restart).
    """

    delivery_count: int
    exclude_link: bool = False
    failed: bool = False


@value_type
class DeadLetter:
    """Move to the dead-letter table, never deliver again."""

    reason: DeadLetterReason
    delivery_count: int


Decision = Ack | Requeue | DeadLetter


def decide(
    settlement: Settlement,
    delivery_count: int,
    limits: Limits,
    *,
    delivery_failed: bool = False,
    undeliverable_here: bool = False,
) -> Decision:
    """The fate of a message whose delivery with ``delivery_count`` ended with ``settlement``.

    ``delivery_failed`` and ``undeliverable_here`` are the fields of a modified outcome and are
    ignored for the other settlements.
    """
    match settlement:
        case Settlement.ACCEPTED:
            return Ack(AckOutcome.ACCEPTED)
        case Settlement.REJECTED:
            return DeadLetter(DeadLetterReason.REJECTED, delivery_count)
        case Settlement.RELEASED:
            return Requeue(delivery_count)
        case Settlement.MODIFIED:
            if not delivery_failed:
                return Requeue(delivery_count, exclude_link=undeliverable_here)
            return _failed(delivery_count, limits, exclude_link=undeliverable_here)
        case Settlement.LINK_LOST:
            return _failed(delivery_count, limits, exclude_link=False)
    raise ValueError(f"unknown settlement {settlement!r}")


def _failed(delivery_count: int, limits: Limits, *, exclude_link: bool) -> Decision:
    count = delivery_count + 1
    if limits.max_delivery_count and count >= limits.max_delivery_count:
        return DeadLetter(DeadLetterReason.MAX_DELIVERY_COUNT, count)
    return Requeue(count, exclude_link=exclude_link, failed=True)


def expires_at(ttl_ms: int | None, absolute_expiry_ms: int | None, published_at_ms: int | None) -> int | None:
    """Instant (ms since the epoch) from which the message is expired; None when it never expires.

    A ttl of 0 or none and an absolute-expiry-time of 0 or none mean "no limit" (JMS uses 0 for
    "never expires").
    """
    limits = []
    if ttl_ms and ttl_ms > 0 and published_at_ms is not None:
        limits.append(published_at_ms + ttl_ms)
    if absolute_expiry_ms and absolute_expiry_ms > 0:
        limits.append(absolute_expiry_ms)
    return min(limits) if limits else None


def is_expired(expiry_ms: int | None, now_ms: int) -> bool:
    """True when a message expiring at ``expiry_ms`` must no longer be delivered at ``now_ms``."""
    return expiry_ms is not None and now_ms >= expiry_ms
