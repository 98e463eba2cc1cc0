"""The publish path's message reading two ways, for differential tests of sharedsub.core.publish.amqp_message.

``proton_outcome`` is the path ``_on_published`` took before issue 13 (check_encoding, proton's
Message.decode, message_columns of tests/proton_columns.py, the routing key from msg.properties/msg.subject);
``decoder_outcome`` is sharedsub.core.publish.amqp_message.decode with the same routing key rule.
``assert_same`` compares them, allowing only the divergences amqp_message documents.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import proton

from sharedsub.core import addressing
from sharedsub.core.errors import InvalidMessage, MessageDecodeError, SharedSubError
from sharedsub.core.publish import amqp_message
from tests import proton_columns

ADDRESS = addressing.Address("fuzz-topic", None)


@dataclass(frozen=True)
class Outcome:
    """``kind``: 'ok', 'decode-error' (MessageDecodeError or anything proton raised while
    decoding) or 'invalid' (InvalidMessage); for 'ok' the columns, to, subject and routing key
    (or the name of the error the routing key raised)."""

    kind: str
    detail: str = ""
    columns: dict[str, Any] | None = None
    to: str | None = None
    subject: str | None = None
    routing_key: str | None = None


def _routing_key(properties: Any, subject: str | None) -> str:
    try:
        return addressing.routing_key(ADDRESS, properties, subject)
    except SharedSubError as exc:
        return f"!{type(exc).__name__}"


def proton_outcome(raw: bytes) -> Outcome:
    """What the pre-issue-13 path made of ``raw``."""
    try:
        proton_columns.check_encoding(raw)
        msg = proton.Message()
        msg.decode(raw)
    except Exception as exc:  # noqa: BLE001 (the handler wrapped every failure here in MessageDecodeError)
        return Outcome("decode-error", f"{type(exc).__name__}: {exc}")
    try:
        columns = proton_columns.message_columns(msg)
    except MessageDecodeError as exc:
        return Outcome("decode-error", exc.description)
    except InvalidMessage as exc:
        return Outcome("invalid", exc.description)
    return Outcome("ok", "", columns, msg.address, msg.subject, _routing_key(msg.properties, msg.subject))


def decoder_outcome(raw: bytes) -> Outcome:
    """What sharedsub.core.publish.amqp_message makes of ``raw``; any other exception propagates."""
    try:
        decoded = amqp_message.decode(raw)
    except MessageDecodeError as exc:
        return Outcome("decode-error", exc.description)
    except InvalidMessage as exc:
        return Outcome("invalid", exc.description)
    key = _routing_key(decoded.routing_properties, decoded.subject)
    return Outcome("ok", "", decoded.columns, decoded.to, decoded.subject, key)


# Refusals of the decoder that proton accepts, each a documented divergence (amqp_message).
DIVERGENT_REFUSALS = ("disagrees with its elements", "nested deeper than")


def assert_same(raw: bytes) -> Outcome:
    """Assert the two paths agree on ``raw`` up to the documented divergences; returns the
    decoder's outcome."""
    old, new = proton_outcome(raw), decoder_outcome(raw)
    nested = amqp_message.holds_nested_described(raw)
    if old.kind != new.kind:
        divergent = new.kind == "decode-error" and old.kind != "decode-error" and any(
            text in new.detail for text in DIVERGENT_REFUSALS)
        assert divergent or nested, f"{raw.hex()}\nproton:  {old}\ndecoder: {new}"
        return new
    if old.kind != "ok" or nested:
        return new
    assert old.columns is not None and new.columns is not None
    assert list(old.columns) == list(new.columns)
    for name, value in old.columns.items():
        if name == "application_properties":
            _assert_same_properties(raw, value, new.columns[name])
        else:
            other = new.columns[name]
            assert value == other and type(value) is type(other), f"{raw.hex()}\n{name}: {value!r} != {other!r}"
    assert (old.to, old.subject, old.routing_key) == (new.to, new.subject, new.routing_key), raw.hex()
    return new


def _assert_same_properties(raw: bytes, old: list[tuple[str, dict[str, Any]]],
                            new: list[tuple[str, dict[str, Any]]]) -> None:
    assert [k for k, _ in old] == [k for k, _ in new], f"{raw.hex()}\n{old}\n{new}"
    for (key, was), (_, now) in zip(old, new, strict=True):
        if was["type"] == "memoryview":  # documented: a binary value is stored as binary, in hex
            assert now["type"] == "binary" and now["string"] is not None, (key, was, now)
        elif was["string"] is not None and "<memory at 0x" in was["string"]:  # a binary inside
            assert now["type"] == was["type"], (key, was, now)
        else:
            assert _same(was, now), f"{raw.hex()}\n{key}: {was} != {now}"


def _same(was: dict[str, Any], now: dict[str, Any]) -> bool:
    """Equal structs, a NaN double equal to a NaN double."""
    a, b = was["double"], now["double"]
    if a is not None and b is not None and math.isnan(a) and math.isnan(b):
        return {**was, "double": None} == {**now, "double": None}
    return was == now
