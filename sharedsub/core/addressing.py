"""Addresses and routing keys (docs/design.md §3); pure.

* Publishing: a target address ``T`` or ``T/key``, or an anonymous-relay link whose messages carry
  ``properties.to`` in the same form. Routing key: the ``/key`` part, else application property
  ``routing-key`` (or ``routing_key``) when a string, else ``properties.subject``, else empty.
* Subscribing: a source address ``T`` (binding ``#``) or ``T/pattern``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from sharedsub.core.errors import InvalidAddress
from sharedsub.core.fanout import binding
from sharedsub.core.layout import is_valid_topic_name


@dataclasses.dataclass(frozen=True, slots=True)
class Address:
    """A parsed address: the topic and the part after the first '/', if any."""

    topic: str
    suffix: str | None


def parse_address(address: str | None) -> Address:
    """Split ``T`` or ``T/rest`` and check the topic name.

    Raises:
        InvalidAddress: empty address or a topic name that is not allowed.
    """
    if not address:
        raise InvalidAddress(address, "an address naming a topic is required")
    topic, sep, rest = address.partition("/")
    if not is_valid_topic_name(topic):
        raise InvalidAddress(
            address, f"topic name {topic!r} must match [A-Za-z0-9][A-Za-z0-9._-]* (at most 200 characters)"
        )
    return Address(topic, rest if sep else None)


def binding_of(address: Address) -> str:
    """Binding pattern of a subscription address: the suffix, or '#' (everything).

    Raises:
        InvalidAddress: a pattern longer than binding.MAX_PATTERN_LENGTH.
    """
    pattern = address.suffix if address.suffix else "#"
    try:
        binding.check_pattern(pattern)
    except ValueError as exc:
        raise InvalidAddress(f"{address.topic}/{pattern[:40]}…", str(exc)) from None
    return pattern


def routing_key(address: Address, application_properties: Mapping[str, object] | None, subject: str | None) -> str:
    """Routing key of a published message (see module docstring for the order).

    Raises:
        InvalidAddress: a key longer than binding.MAX_KEY_LENGTH.
    """
    key = _routing_key(address, application_properties, subject)
    try:
        binding.check_key(key)
    except ValueError as exc:
        raise InvalidAddress(f"{address.topic} (key {key[:40]!r}…)", str(exc)) from None
    return key


def _routing_key(address: Address, application_properties: Mapping[str, object] | None, subject: str | None) -> str:
    if address.suffix is not None:
        return address.suffix
    if isinstance(application_properties, Mapping):
        for name in ("routing-key", "routing_key"):
            value = application_properties.get(name)
            if isinstance(value, str):
                return value
    return subject if isinstance(subject, str) else ""
