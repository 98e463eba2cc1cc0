"""The header and properties sections' fields, read as proton 0.40's message decoder reads them; pure.

:func:`header_fields` gives (durable, priority, ttl) of a header section and
:func:`properties_fields` the thirteen fields of a properties section, each from the element
extents sharedsub.core.publish.amqp_walk collected when every field is null or of its usual
encoding (the fast path, nearly every message), else positionally with proton's type rules
(sharedsub.core.publish.proton_fields: a field of another type reads as absent). Text fields
are returned as bytes; :func:`c_string` turns one into the string proton's C getter hands out
and :func:`ms` a timestamp or ttl into the column's milliseconds, as the topic columns take
them (sharedsub.core.publish.amqp_message). Raises only MessageDecodeError, for an id or text
field that is not UTF-8.
"""

from __future__ import annotations

import uuid

from sharedsub.core.errors import MessageDecodeError
from sharedsub.core.publish.amqp_sections import SectionFields
from sharedsub.core.publish.amqp_types import INT64
from sharedsub.core.publish.proton_fields import (
    list_fields,
    read_binary,
    read_bool,
    read_id,
    read_text,
    read_timestamp,
    read_ubyte,
    read_uint,
)


def c_string(data: bytes | None, name: str) -> str | None:
    """A properties string as proton's C getter hands it out: up to its first NUL, UTF-8.

    Raises:
        MessageDecodeError: the text is not UTF-8 (``name`` says which field).
    """
    if data is None:
        return None
    nul = data.find(0)
    if nul >= 0:
        data = data[:nul]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"properties.{name} is not valid UTF-8: {exc}") from None


def ms(millis: int) -> int | None:
    """A column's ms of a timestamp or ttl, as _ms of tests/proton_columns.py makes them of proton's float
    seconds (millis / 1000.0), bit for bit; None for 0."""
    seconds = float(millis) / 1000.0
    if not seconds:
        return None
    return min(max(round(seconds * 1000), INT64[0]), INT64[1])


def header_fields(raw: bytes, section: SectionFields) -> tuple[bool, int, int]:
    """(durable, priority, ttl ms) of a header section, as proton reads them."""
    start, fields = section
    fast = _header_fast(raw, fields) if fields is not None else None
    if fast is not None:
        return fast
    pos, stop = list_fields(raw, start, len(raw))
    durable, pos = read_bool(raw, pos, stop)
    priority, pos = read_ubyte(raw, pos, stop)
    ttl, pos = read_uint(raw, pos, stop)
    return durable, 4 if priority is None else priority, ttl


def _header_fast(raw: bytes, fields: list[tuple[int, int, int]]) -> tuple[bool, int, int] | None:
    """The header fields when each is null or of its type (else None: read them proton's way)."""
    durable, priority, ttl = False, 4, 0
    count = len(fields)
    if count > 0:
        code, start, _ = fields[0]
        if code == 0x41:
            durable = True
        elif code == 0x56:
            durable = raw[start + 1] != 0
        elif code not in (0x40, 0x42):
            return None
    if count > 1:
        code, start, _ = fields[1]
        if code == 0x50:
            priority = raw[start + 1]
        elif code != 0x40:
            return None
    if count > 2:
        code, start, stop = fields[2]
        if code == 0x70 or code == 0x52:
            ttl = int.from_bytes(raw[start + 1 : stop])
        elif code not in (0x40, 0x43):
            return None
    return durable, priority, ttl


PropertyFields = tuple[str | None, bytes | None, dict[str, bytes | None], str | None, int, int, int, str | None]
_TEXT_FIELDS = {2: "to", 3: "subject", 4: "reply-to", 6: "content-type", 7: "content-encoding",
                10: "group-id", 12: "reply-to-group-id"}


def properties_fields(raw: bytes, section: SectionFields) -> PropertyFields:
    """(message-id text, user-id, raw text fields, correlation-id text, expiry, creation,
    group-sequence, None) of a properties section, as proton reads them."""
    start, fields = section
    if fields is not None:
        fast = _properties_fast(raw, fields)
        if fast is not None:
            return fast
    pos, stop = list_fields(raw, start, len(raw))
    texts: dict[str, bytes | None] = {}
    message_id, pos = read_id(raw, pos, stop, "message-id")
    user_id, pos = read_binary(raw, pos, stop)
    for name in ("to", "subject", "reply-to"):
        texts[name], pos = read_text(raw, pos, stop, (0xA1, 0xB1))
    correlation_id, pos = read_id(raw, pos, stop, "correlation-id")
    for name in ("content-type", "content-encoding"):
        texts[name], pos = read_text(raw, pos, stop, (0xA3, 0xB3))
    expiry, pos = read_timestamp(raw, pos, stop)
    creation, pos = read_timestamp(raw, pos, stop)
    texts["group-id"], pos = read_text(raw, pos, stop, (0xA1, 0xB1))
    group_sequence, pos = read_uint(raw, pos, stop)
    texts["reply-to-group-id"], pos = read_text(raw, pos, stop, (0xA1, 0xB1))
    return message_id, user_id, texts, correlation_id, expiry, creation, group_sequence, None


def _fast_id(raw: bytes, code: int, start: int, stop: int, name: str) -> str | None | bool:
    """An id field of a usual type as id_text renders it; False for any other type."""
    if code == 0x40:
        return None
    if code == 0xA1:
        try:
            return raw[start + 2 : stop].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MessageDecodeError(f"properties.{name} is not valid UTF-8: {exc}") from None
    if code == 0x53 or code == 0x80 or code == 0x44:
        return str(int.from_bytes(raw[start + 1 : stop]))
    if code == 0x98:
        return str(uuid.UUID(bytes=raw[start + 1 : stop]))
    if code == 0xA0:
        return raw[start + 2 : stop].decode("utf-8", "replace")
    return False


def _properties_fast(  # noqa: C901 (one branch per properties field, in wire order)
    raw: bytes, fields: list[tuple[int, int, int]]
) -> PropertyFields | None:
    """The properties fields when each is null or of its usual encoding (else None)."""
    message_id: str | None = None
    correlation_id: str | None = None
    user_id: bytes | None = None
    texts: dict[str, bytes | None] = {}
    expiry = creation = group_sequence = 0
    for index, (code, start, stop) in enumerate(fields[:13]):
        if index in _TEXT_FIELDS:
            if code == (0xA3 if index in (6, 7) else 0xA1):
                texts[_TEXT_FIELDS[index]] = raw[start + 2 : stop]
            elif code != 0x40:
                return None
        elif index == 0 or index == 5:
            value = _fast_id(raw, code, start, stop, "message-id" if index == 0 else "correlation-id")
            if value is False:
                return None
            if index == 0:
                message_id = value  # type: ignore[assignment]
            else:
                correlation_id = value  # type: ignore[assignment]
        elif index == 1:
            if code == 0xA0:
                user_id = raw[start + 2 : stop]
            elif code != 0x40:
                return None
        elif index == 8 or index == 9:
            if code == 0x83:
                if index == 8:
                    expiry = int.from_bytes(raw[start + 1 : stop], signed=True)
                else:
                    creation = int.from_bytes(raw[start + 1 : stop], signed=True)
            elif code != 0x40:
                return None
        else:  # 11: group-sequence
            if code == 0x70 or code == 0x52:
                group_sequence = int.from_bytes(raw[start + 1 : stop])
            elif code not in (0x40, 0x43):
                return None
    return message_id, user_id, texts, correlation_id, expiry, creation, group_sequence, None

