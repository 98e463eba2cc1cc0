"""proton ↔ sharedsub value translation: AMQP message fields to topic-table columns.

The encoded message bytes are stored untouched; this module only extracts typed copies of the
fields routing, selectors and notebooks need.
"""

from __future__ import annotations

import uuid
from typing import Any

import proton

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
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _ms(seconds: float | None) -> int | None:
    if not seconds:
        return None
    return int(round(seconds * 1000))


def message_columns(msg: proton.Message) -> dict[str, Any]:
    """Topic-table columns read from a decoded message (all but seq, time, publisher, key, size)."""
    props = msg.properties or {}
    return {
        "durable": bool(msg.durable),
        "priority": int(msg.priority),
        "ttl": _ms(msg.ttl),
        "message_id": id_text(msg.id),
        "user_id": bytes(msg.user_id) if msg.user_id else None,
        "to": msg.address,
        "subject": msg.subject,
        "reply_to": msg.reply_to,
        "correlation_id": id_text(msg.correlation_id),
        "content_type": str(msg.content_type) if msg.content_type else None,
        "content_encoding": str(msg.content_encoding) if msg.content_encoding else None,
        "absolute_expiry_time": _ms(msg.expiry_time),
        "creation_time": _ms(msg.creation_time),
        "group_id": msg.group_id,
        "group_sequence": int(msg.group_sequence) if msg.group_sequence else None,
        "reply_to_group_id": msg.reply_to_group_id,
        "application_properties": [(str(k), property_value(v)) for k, v in props.items()],
    }
