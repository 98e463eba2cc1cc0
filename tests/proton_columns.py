"""The publish path's reading of a message before issue 13, kept as the oracle of the decoder's
differential tests (tests/message_oracle.py, tests/unit/test_message_columns.py,
tests/unit/test_message_encoding.py): ``check_encoding``, then proton's ``Message.decode``, then
``message_columns``. Test code only; the service reads messages with
sharedsub.core.publish.amqp_message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import cproton
import proton

from sharedsub.core.errors import InvalidMessage, MessageDecodeError

# AMQP type name of each proton Python type (proton decodes every AMQP type to its own class).
_NUMBER_TYPES: list[tuple[type, str, bool]] = [
    (proton.byte, "byte", True),
    (proton.short, "short", True),
    (proton.int32, "int", True),
    (proton.ubyte, "ubyte", True),
    (proton.ushort, "ushort", True),
    (proton.uint, "uint", True),
    (proton.ulong, "ulong", True),
    (proton.timestamp, "timestamp", True),
    (proton.float32, "float", False),
]


# Message section descriptors (AMQP 1.0 §3.2), as codes and as symbols.
_SECTIONS: dict[Any, str] = {
    0x70: "amqp:header:list",
    0x71: "amqp:delivery-annotations:map",
    0x72: "amqp:message-annotations:map",
    0x73: "amqp:properties:list",
    0x74: "amqp:application-properties:map",
    0x75: "amqp:data:binary",
    0x76: "amqp:amqp-sequence:list",
    0x77: "amqp:amqp-value:*",
    0x78: "amqp:footer:map",
}
_SECTION_DESCRIPTORS = set(_SECTIONS) | set(_SECTIONS.values())


def check_encoding(raw: bytes) -> None:
    """Raise ValueError unless ``raw`` is a sequence of complete AMQP message sections.

    proton's message decoder stops quietly at bytes it cannot decode (a truncated value reads as
    a missing body), so a transfer is checked here before it is stored: every byte must belong
    to a complete described value whose descriptor is a message section.
    """
    data = proton.Data()
    view = memoryview(raw)
    offset = 0
    while offset < len(raw):
        data.clear()
        try:
            used = data.decode(view[offset:])
        except proton.DataException as exc:
            raise ValueError(f"undecodable bytes at offset {offset}: {exc}") from None
        if used <= 0:
            raise ValueError(f"undecodable bytes at offset {offset}")
        data.rewind()
        data.next()
        if data.type() != proton.Data.DESCRIBED:
            raise ValueError(f"the value at offset {offset} is not a message section (not a described type)")
        data.enter()
        data.next()
        descriptor = data.get_object()
        data.exit()
        if descriptor not in _SECTION_DESCRIPTORS:
            raise ValueError(f"the value at offset {offset} is not a message section (descriptor {descriptor!r})")
        offset += used


def property_value(value: Any) -> dict[str, Any]:
    """Typed struct (schemas.PROPERTY_VALUE) for one application-property value."""
    out: dict[str, Any] = {"type": None, "long": None, "double": None, "string": None, "bool": None}
    if value is None:
        out["type"] = "null"
    elif isinstance(value, bool):
        out.update(type="boolean", bool=value)
    elif isinstance(value, proton.char):
        out.update(type="char", string=str(value))
    elif isinstance(value, proton.symbol):
        out.update(type="symbol", string=str(value))
    elif isinstance(value, str):
        out.update(type="string", string=value)
    elif isinstance(value, int):
        for cls, name, _ in _NUMBER_TYPES:
            if isinstance(value, cls):
                out["type"] = name
                break
        else:
            out["type"] = "long"
        if out["type"] == "timestamp":
            out["string"] = str(int(value))
        elif -(2**63) <= value < 2**63:
            out["long"] = int(value)
        else:  # ulong above the signed range: keep it comparable as an approximate number
            out["double"] = float(value)
    elif isinstance(value, float):
        out.update(type="float" if isinstance(value, proton.float32) else "double", double=float(value))
    elif isinstance(value, bytes):
        out.update(type="binary", string=value.hex())
    elif isinstance(value, uuid.UUID):
        out.update(type="uuid", string=str(value))
    else:
        out.update(type=type(value).__name__, string=str(value))
    return out


def id_text(value: Any) -> str | None:
    """Message-id / correlation-id rendered as a string (None when absent)."""
    if value is None:
        return None
    if isinstance(value, (bytes, memoryview)):  # proton hands binary ids out as a memoryview
        return bytes(value).decode("utf-8", "replace")
    return str(value)


_INT64 = (-(2**63), 2**63 - 1)


def _ms(seconds: float | None) -> int | None:
    """Milliseconds of an AMQP timestamp or milliseconds field, which proton hands out as float
    seconds; clamped to the int64 column (2^63-1 ms comes back a little above it)."""
    if not seconds:
        return None
    return min(max(int(round(seconds * 1000)), _INT64[0]), _INT64[1])


def _read(name: str, read: Callable[[], Any]) -> Any:
    """``read()`` of properties field ``name``: proton decodes its strings only when read."""
    try:
        return read()
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"properties.{name} is not valid UTF-8: {exc}") from None


def _field(msg: proton.Message, attribute: str, name: str) -> Any:
    """A properties field of ``msg``."""
    return _read(name, lambda: getattr(msg, attribute))


def _symbol_field(msg: proton.Message, getter: Callable[[Any], str | None], name: str) -> str | None:
    """content-type / content-encoding, None when absent: proton's Message properties wrap the
    C string in ``symbol()`` even when it is NULL, which reads as the text 'None'."""
    return _read(name, lambda: getter(msg._msg))  # noqa: SLF001 (proton has no public way to tell NULL from 'None')


def message_columns(msg: proton.Message) -> dict[str, Any]:
    """Topic-table columns read from a decoded message (all but seq, time, publisher, key, size).

    Raises:
        InvalidMessage: an application-properties section that is not a map.
        MessageDecodeError: a properties field that is not valid UTF-8 (proton decodes those
            strings only here, after the message decoded).
    """
    props = msg.properties or {}
    if not isinstance(props, dict):
        raise InvalidMessage(f"application-properties must be a map, not a {type(props).__name__}")
    content_type = _symbol_field(msg, cproton.pn_message_get_content_type, "content-type")
    content_encoding = _symbol_field(msg, cproton.pn_message_get_content_encoding, "content-encoding")
    return {
        "durable": bool(msg.durable),
        "priority": int(msg.priority),
        "ttl": _ms(msg.ttl),
        "message_id": id_text(_field(msg, "id", "message-id")),
        "user_id": bytes(msg.user_id) if msg.user_id else None,
        "to": _field(msg, "address", "to"),
        "subject": _field(msg, "subject", "subject"),
        "reply_to": _field(msg, "reply_to", "reply-to"),
        "correlation_id": id_text(_field(msg, "correlation_id", "correlation-id")),
        "content_type": content_type,
        "content_encoding": content_encoding,
        "absolute_expiry_time": _ms(msg.expiry_time),
        "creation_time": _ms(msg.creation_time),
        "group_id": _field(msg, "group_id", "group-id"),
        "group_sequence": int(msg.group_sequence) if msg.group_sequence else None,
        "reply_to_group_id": _field(msg, "reply_to_group_id", "reply-to-group-id"),
        "application_properties": [(str(k), property_value(v)) for k, v in props.items()],
    }
