"""The Qpid JMS link-name scheme for topic subscriptions (docs/wire.md §1.4); pure.

Qpid JMS names a subscription's receiver links after the subscription and tells consumers of
the same subscription on one connection apart by a suffix after ``|``:

=============================  ====================  ===========================================
kind                           first consumer        n-th consumer (n >= 2)
=============================  ====================  ===========================================
unshared durable               ``name``              (one at a time)
shared durable, ClientID       ``name``              ``name|n``
shared durable, no ClientID    ``name|global``       ``name|global<n>`` (no second ``|``)
shared volatile, ClientID      ``name|volatile1``    ``name|volatile<n>``
shared volatile, no ClientID   ``name|global-volatile1``  ``name|global-volatile<n>``
plain topic consumer           ``qpid-jms:receiver:<consumerId>:<address>``
=============================  ====================  ===========================================

The service reads only two things from a name (docs/design.md §4.2): the subscription name of a
*shared* subscription is the link name cut at the first ``|`` (unshared ones use the whole link
name), and a null-source lookup is global when the name carries the ``global`` suffix (Proton-C
cannot read link capabilities, docs/wire.md §3). Any other string is a valid link name too; it
simply carries no hints.
"""

from __future__ import annotations

import dataclasses
import re

DELIMITER = "|"
"""Qpid JMS ``SUB_NAME_DELIMITER``; a subscription name never contains it (docs/wire.md §1.4)."""

# The part after the first '|': optional kind, then the consumer counter. Counters start at 1
# and have no leading zero; Broker-J's own tests also use 'sub|1' (docs/wire.md §5.15).
_SUFFIX = re.compile(r"(?P<kind>global-volatile|global|volatile)?(?P<n>[1-9][0-9]*)?")


@dataclasses.dataclass(frozen=True, slots=True)
class LinkName:
    """What a link name says under the Qpid JMS scheme.

    Attributes:
        subscription_name: the name cut at the first ``|`` (at an index > 0, as Broker-J cuts);
            the whole name when it has no ``|``. It is the subscription's name only for a
            *shared* subscription: an unshared one is named by the whole link name
            (:func:`subscription_name_of`).
        global_hint: the suffix is ``global``, ``global<n>`` or ``global-volatile<n>``.
        volatile_hint: the suffix is ``volatile<n>`` or ``global-volatile<n>``.
        ordinal: the consumer number the name encodes (1 for ``name`` and ``name|global``),
            or None when the part after ``|`` is not in the scheme (``a|b|c``, ``x|foo``,
            ``x|volatile`` without a number).
    """

    subscription_name: str
    global_hint: bool
    volatile_hint: bool
    ordinal: int | None


def _cut(link_name: str) -> tuple[str, str | None]:
    index = link_name.find(DELIMITER)
    # Broker-J cuts only when '|' is not the first character (docs/wire.md §2.4 step 2).
    if index <= 0:
        return link_name, None
    return link_name[:index], link_name[index + 1 :]


def parse_link_name(link_name: str) -> LinkName:
    """Read a link name under the Qpid JMS scheme; never fails.

    Examples: ``sub`` → (sub, -, -, 1); ``sub|2`` → (sub, -, -, 2); ``sub|global`` →
    (sub, global, -, 1); ``sub|global2`` → (sub, global, -, 2); ``sub|volatile7`` →
    (sub, -, volatile, 7); ``sub|global-volatile1`` → (sub, global, volatile, 1);
    ``a|b|c`` → (a, -, -, None).
    """
    name, suffix = _cut(link_name)
    if suffix is None:
        return LinkName(name, global_hint=False, volatile_hint=False, ordinal=1)
    match = _SUFFIX.fullmatch(suffix)
    if match is None or not suffix:
        return LinkName(name, global_hint=False, volatile_hint=False, ordinal=None)
    kind, digits = match.group("kind") or "", match.group("n")
    if digits is not None:
        ordinal: int | None = int(digits)
    else:
        # Only 'name|global' omits its counter; 'volatile' names always carry one (docs/wire.md §1.4).
        ordinal = 1 if kind == "global" else None
    return LinkName(
        name,
        global_hint=kind.startswith("global"),
        volatile_hint=kind.endswith("volatile"),
        ordinal=ordinal,
    )


def subscription_name_of(link_name: str, *, shared: bool) -> str:
    """The subscription name a link name gives (docs/design.md §4.2, docs/wire.md §2.4).

    Shared: the link name cut at the first ``|`` (when it is at an index > 0). Unshared: the
    whole link name.
    """
    return _cut(link_name)[0] if shared else link_name


def build_link_name(
    subscription_name: str, *, shared: bool, durable: bool, is_global: bool = False, ordinal: int = 1
) -> str:
    """The link name Qpid JMS gives the ``ordinal``-th consumer of a subscription (docs/wire.md §1.4).

    Args:
        subscription_name: the JMS subscription name; not empty, no ``|``.
        shared: a shared subscription (``createSharedConsumer``/``createSharedDurableConsumer``).
        durable: a durable subscription; an unshared non-durable consumer has no subscription
            name (see :func:`plain_consumer_link_name`).
        is_global: the connection has no explicit ClientID (shared subscriptions only).
        ordinal: the consumer's number on its connection, from 1.

    Raises:
        ValueError: a name the client itself refuses, an unshared non-durable or unshared global
            subscription, or an ordinal other than 1 for an unshared durable one.
    """
    if not subscription_name or DELIMITER in subscription_name:
        msg = f"subscription name {subscription_name!r} must be non-empty and must not contain {DELIMITER!r}"
        raise ValueError(msg)
    if ordinal < 1:
        msg = f"ordinal {ordinal} must be at least 1"
        raise ValueError(msg)
    if not shared:
        if not durable:
            msg = "an unshared non-durable consumer has no subscription name; use plain_consumer_link_name"
            raise ValueError(msg)
        if is_global or ordinal != 1:
            msg = "an unshared durable subscription has one consumer and needs an explicit ClientID"
            raise ValueError(msg)
        return subscription_name
    if durable:
        if is_global:
            return f"{subscription_name}|global" + (str(ordinal) if ordinal > 1 else "")
        return subscription_name if ordinal == 1 else f"{subscription_name}|{ordinal}"
    kind = "global-volatile" if is_global else "volatile"
    return f"{subscription_name}|{kind}{ordinal}"


def plain_consumer_link_name(consumer_id: str, address: str) -> str:
    """The link name Qpid JMS gives a queue or plain topic consumer (docs/wire.md §1.3)."""
    return f"qpid-jms:receiver:{consumer_id}:{address}"
