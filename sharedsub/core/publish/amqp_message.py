"""Pure decoder of AMQP 1.0 messages as they arrive in a transfer (no proton, no I/O).

``decode(raw)`` reads the bytes of a published message once and returns the topic-table columns
(the dict ``message_columns`` of the previous path, kept in tests/proton_columns.py, builds from a proton-decoded message),
``properties.to`` and ``properties.subject`` for routing, and the string-valued application
properties the routing key may come from. Body, annotations and footer are walked to validate
them but never turned into Python objects (only their strings are checked to be UTF-8/ASCII).

It accepts and refuses what the previous path did (``check_encoding``, then proton's
``Message.decode`` and ``message_columns``), reading the fields as proton 0.40 does:

* Acceptance is that of proton's ``pn_data_decode`` section by section: every byte belongs to a
  complete described value whose descriptor equals (as a Python value) a section code 0x70-0x78
  or its symbolic name; lists, maps and arrays are read by their element count; at most 65535
  nodes in a section (proton's node limit).
* Only sections whose descriptor is encoded as a ulong (0x53, 0x80) are read for fields; others
  (symbolic descriptors, codes encoded as another integer type) are accepted and ignored, as
  proton's message decoder ignores them.
* header and properties fields are read positionally with proton's type rules: a field of another
  type reads as absent (a timestamp field of another type is not even skipped: proton reads the
  next field from inside it, and so does this decoder); the last header/properties section wins.
  String fields stop at their first NUL (proton's C strings). message-id/correlation-id keep only
  ulong, uuid, binary and string ids.
* application-properties (the last such section) is decoded like proton's ``Data.get_object``:
  keys compare as Python values (``1``, ``ulong(1)`` and ``True`` are one key; the first key's
  text and the last value stay), binary/list/map/described/array keys refuse the message, and a
  value that is not a map refuses it with InvalidMessage unless it is empty/zero/null.
* The sections proton turns into Python objects (the last delivery-annotations,
  message-annotations and body section) refuse the message when they hold a string that is not
  UTF-8, a symbol that is not ASCII, a char above U+10FFFF or an unhashable map key.

Intentional divergences from proton (each refuses or stores what proton could not handle sanely):

* A list, map or array whose size field disagrees with the bytes its elements take is refused
  (AMQP 1.0 §1.6 makes it malformed; proton accepts it, and its two decoders then disagree about
  where the following values start).
* A binary application-property value is stored as type ``binary`` with its bytes in hex; proton
  hands out a memoryview, which property_value stored as type ``memoryview`` and text
  ``<memory at 0x...>``. Inside list/map/described/array values a binary renders as ``b'...'``.
* A described value whose value is itself described is decoded as encoded; proton's Data tree
  loses track after one (the values after it move into it or disappear, and a moved value can
  turn into an unhashable key and refuse the message). ``Decoded.nested_described`` says when a
  message holds one; such a section ends proton's message decoder's walk (later sections are
  ignored by it, and by this decoder).
* Values nested deeper than MAX_DEPTH are refused (proton's Python layer fails at its
  recursion limit instead).
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple, TypeAlias, TypedDict

from sharedsub.core.errors import InvalidMessage, MessageDecodeError
from sharedsub.core.publish.amqp_sections import (
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    BODY,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    SectionFields,
    described_value_is_described,
    section_descriptor,
)
from sharedsub.core.publish.amqp_types import (
    CLASS_NAMES,
    COMPOUND,
    DOUBLE,
    FIXED,
    FLOAT,
    INT64,
    INT_NAMES,
    PN_TYPE,
    SIGNED,
    UNHASHABLE_KEYS,
)
from sharedsub.core.publish.amqp_walk import ValueWalk, check_text, malformed, underflow


class PropertyValue(TypedDict):
    """One application property's value as the ``application_properties`` column stores it (the
    PROPERTY_VALUE struct of sharedsub.storage.schemas.TOPIC, as property_value builds it)."""

    type: str
    long: int | None
    double: float | None
    string: str | None
    bool: bool | None

_Properties = tuple[list[tuple[str, PropertyValue]], dict[str, str]]
# (the application_properties column, the string-valued properties by string key)


class Decoded(NamedTuple):
    """What the publish path needs of a message.

    ``columns``: exactly the keys and value types of ``message_columns`` (tests/proton_columns.py) (a fresh
    dict the caller may extend). ``to`` / ``subject``: properties.address and
    properties.subject (also in ``columns``). ``routing_properties``: the application
    properties whose key and value are strings (string, symbol or char), for
    ``addressing.routing_key``. ``nested_described``: a described value whose value is
    described occurs (see the module docstring).
    """

    columns: dict[str, object]
    to: str | None
    subject: str | None
    routing_properties: dict[str, str]
    nested_described: bool


def decode(raw: bytes | bytearray | memoryview) -> Decoded:  # noqa: C901 (one pass, one branch per section kind)
    """Validate and read a transfer's bytes (one AMQP message, sections as sent).

    Raises:
        MessageDecodeError: the bytes are not a sequence of complete message sections, or hold
            text proton cannot decode (see the module docstring for the exact rules).
        InvalidMessage: an application-properties section that is not a map.
    """
    if type(raw) is not bytes:
        raw = bytes(raw)
    end = len(raw)
    pos = 0
    walk = ValueWalk(raw)
    # The sections proton's decoder reads last: (offset, extents of the list's fields or None).
    header: SectionFields | None = None
    properties: SectionFields | None = None
    application: SectionFields | None = None
    deferred: dict[int, MessageDecodeError | None] = {}  # kind -> error of its last section
    seen_by_proton = True
    kind: int | None
    while pos < end:
        start = pos
        if raw[pos] != 0x00:
            raise malformed(pos, "a value that is not a message section (not a described type)")
        if pos + 2 < end and raw[pos + 1] == 0x53 and HEADER <= raw[pos + 2] <= FOOTER:
            kind, pos = raw[pos + 2], pos + 3  # the usual smallulong descriptor
            walk.nodes = 2  # the described node and its descriptor
        else:
            walk.nodes = 1
            kind, pos = section_descriptor(walk, pos + 1)
        value_start = pos
        if pos >= end:
            raise underflow(pos)
        if raw[pos] == 0x00 and described_value_is_described(raw, pos + 1):
            seen_by_proton = False  # proton's section scanner gives up here (module docstring)
        if kind is None or not seen_by_proton:
            pos = walk.value(pos, 1, False)
        elif kind in (DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS) or kind in BODY:
            group = AMQP_VALUE if kind in BODY else kind
            try:
                pos = walk.value(pos, 1, True)
                deferred[group] = None
            except MessageDecodeError as exc:  # only the last section of its kind counts, and
                deferred[group] = exc  # only after every section proved structurally whole
                pos = _structural(walk, value_start)
        elif kind == HEADER or kind == PROPERTIES:
            fields: list[tuple[int, int, int]] | None = None
            if raw[pos] in (0xC0, 0xD0):
                fields = []
                walk.nodes += 1
                pos = walk.compound(raw[pos], pos + 1, 1, False, fields)
            else:
                if raw[pos] == 0x45:  # list0 (rhea sends its properties so): no fields at all
                    fields = []
                pos = walk.value(pos, 1, False)
            if kind == HEADER:
                header = (start, fields)
            else:
                properties = (start, fields)
        elif kind == APPLICATION_PROPERTIES:
            map_fields: list[tuple[int, int, int]] | None = None
            if raw[pos] in (0xC1, 0xD1):
                map_fields = []
                walk.nodes += 1
                pos = walk.compound(raw[pos], pos + 1, 1, False, map_fields)
            else:
                pos = walk.value(pos, 1, False)
            application = (value_start, map_fields)
        else:
            pos = walk.value(pos, 1, False)
    # The order proton's Message.decode and message_columns refuse in.
    for group in (DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS):
        if (error := deferred.get(group)) is not None:
            raise error
    entries: _Properties = ([], {})
    not_a_map: InvalidMessage | None = None
    if application is not None:
        try:
            entries = _application_properties(raw, *application)
        except InvalidMessage as exc:
            not_a_map = exc
    if (error := deferred.get(AMQP_VALUE)) is not None:
        raise error
    if not_a_map is not None:
        raise not_a_map
    return _columns(raw, header, properties, entries, walk.nested)


def _structural(walk: ValueWalk, pos: int) -> int:
    """Offset after the section value at ``pos``, walked again without semantic checks (after
    a semantic failure, so that a later structural fault still takes precedence)."""
    walk.nodes = 2  # the described node and the descriptor
    return walk.value(pos, 1, False)


# --------------------------------------------------------------------------- proton's field readers
# Mirrors of proton 0.40's consumers (c/src/core/consumers.h): positional, type-strict, and on a
# failed read the position jumps to the end of the enclosing list.


def _skip_not_described(raw: bytes, code: int, pos: int, end: int) -> int:
    category = code >> 4
    if category == 4:
        return pos
    width = (0, 0, 0, 0, 0, 1, 2, 4, 8, 16)[category] if category <= 9 else None
    if width:
        return min(pos + width, end)
    if category in (0xA, 0xC, 0xE):
        if pos + 1 > end:
            return end
        size = raw[pos]
        pos += 1
    elif category in (0xB, 0xD, 0xF):
        if pos + 4 > end:
            return end
        size = int.from_bytes(raw[pos : pos + 4])
        pos += 4
    else:
        return end
    return min(pos + size, end)


def _skip(raw: bytes, code: int, pos: int, end: int) -> int:
    if code == 0x00:
        if pos + 1 > end:
            return end
        pos = _skip_not_described(raw, raw[pos], pos + 1, end)
        if pos + 1 > end:
            return end
        code = raw[pos]
        pos += 1
    return _skip_not_described(raw, code, pos, end)


def _read_sized(raw: bytes, pos: int, end: int, wide: bool) -> tuple[bytes | None, int]:
    if wide:
        if pos + 4 > end:
            return None, end
        size = int.from_bytes(raw[pos : pos + 4])
        pos += 4
    else:
        if pos + 1 > end:
            return None, end
        size = raw[pos]
        pos += 1
    if pos + size > end:
        return None, end
    return raw[pos : pos + size], pos + size


def _list_fields(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    """(start, end) of the fields of the described list at ``pos`` (``D.[`` in proton's specs);
    an empty range when it is not a described list."""
    if pos + 1 > end or raw[pos] != 0x00:
        return end, end
    pos += 1
    pos = _skip_not_described(raw, raw[pos], pos + 1, end) if pos < end else end
    if pos + 1 > end:
        return end, end
    code = raw[pos]
    pos += 1
    if code == 0xC0:
        if pos + 1 > end:
            return end, end
        size = raw[pos]
        pos += 1
        stop = pos + min(size, end - pos)
        return (pos + 1, stop) if pos + 1 <= stop else (stop, stop)
    if code == 0xD0:
        if pos + 4 > end:
            return end, end
        size = int.from_bytes(raw[pos : pos + 4])
        pos += 4
        stop = pos + min(size, end - pos)
        return (pos + 4, stop) if pos + 4 <= stop else (stop, stop)
    return end, end


def _bool(raw: bytes, pos: int, end: int) -> tuple[bool, int]:
    if pos + 1 > end:
        return False, end
    code = raw[pos]
    pos += 1
    if code == 0x41:
        return True, pos
    if code == 0x42:
        return False, pos
    if code == 0x56:
        return (raw[pos] != 0, pos + 1) if pos + 1 <= end else (False, end)
    return False, _skip(raw, code, pos, end)


def _ubyte(raw: bytes, pos: int, end: int) -> tuple[int | None, int]:
    if pos + 1 > end:
        return None, end
    code = raw[pos]
    pos += 1
    if code == 0x50:
        return (raw[pos], pos + 1) if pos + 1 <= end else (None, end)
    return None, _skip(raw, code, pos, end)


def _uint(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 1 > end:
        return 0, end
    code = raw[pos]
    pos += 1
    if code == 0x43:
        return 0, pos
    if code == 0x52:
        return (raw[pos], pos + 1) if pos + 1 <= end else (0, end)
    if code == 0x70:
        return (int.from_bytes(raw[pos : pos + 4]), pos + 4) if pos + 4 <= end else (0, end)
    return 0, _skip(raw, code, pos, end)


def _timestamp(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 1 > end:
        return 0, end
    code = raw[pos]
    pos += 1
    if code == 0x83:
        if pos + 8 > end:
            return 0, end
        return int.from_bytes(raw[pos : pos + 8], signed=True), pos + 8
    return 0, pos  # proton does not skip a value of another type here


def _text(raw: bytes, pos: int, end: int, codes: tuple[int, int]) -> tuple[bytes | None, int]:
    """A string (codes 0xA1/0xB1) or symbol (0xA3/0xB3) field's bytes; None when absent."""
    if pos + 1 > end:
        return None, end
    code = raw[pos]
    pos += 1
    if code == codes[0]:
        return _read_sized(raw, pos, end, False)
    if code == codes[1]:
        return _read_sized(raw, pos, end, True)
    return None, _skip(raw, code, pos, end)


def _binary(raw: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 1 > end:
        return None, end
    code = raw[pos]
    pos += 1
    if code == 0x40:
        return None, pos
    if code in (0xA0, 0xB0):
        return _read_sized(raw, pos, end, code == 0xB0)
    return None, _skip(raw, code, pos, end)


def _atom_id(raw: bytes, pos: int, end: int, name: str) -> tuple[str | None, int]:
    """A message-id/correlation-id as id_text renders it (None for absent or non-id types)."""
    if pos + 1 > end:
        return None, end
    code = raw[pos]
    pos += 1
    if code == 0x44:
        return "0", pos
    if code in (0x53, 0x80):
        width = 1 if code == 0x53 else 8
        return (str(int.from_bytes(raw[pos : pos + width])), pos + width) if pos + width <= end else (None, end)
    if code == 0x98:
        return (str(uuid.UUID(bytes=raw[pos : pos + 16])), pos + 16) if pos + 16 <= end else (None, end)
    if code in (0xA0, 0xB0, 0xA1, 0xB1):
        data, pos = _read_sized(raw, pos, end, code >= 0xB0)
        if data is None:
            return None, pos
        if code & 0x0F == 0:
            return data.decode("utf-8", "replace"), pos
        try:
            return data.decode("utf-8"), pos
        except UnicodeDecodeError as exc:
            raise MessageDecodeError(f"properties.{name} is not valid UTF-8: {exc}") from None
    # ids proton reads and then drops (uint, ushort, ubyte, boolean, timestamp, symbol) or skips
    dropped = {0x52: 1, 0x70: 4, 0x60: 2, 0x50: 1, 0x56: 1, 0x83: 8}.get(code)
    if code in (0x43, 0x41, 0x42, 0x40):
        return None, pos
    if dropped is not None:
        return None, min(pos + dropped, end)
    if code in (0xA3, 0xB3):
        return None, _read_sized(raw, pos, end, code == 0xB3)[1]
    return None, _skip(raw, code, pos, end)


def _c_string(data: bytes | None, name: str) -> str | None:
    """A properties string as proton's C getter hands it out: up to its first NUL, UTF-8."""
    if data is None:
        return None
    nul = data.find(0)
    if nul >= 0:
        data = data[:nul]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"properties.{name} is not valid UTF-8: {exc}") from None


def _ms(millis: int) -> int | None:
    """translate._ms of proton's float seconds (millis / 1000.0), bit for bit."""
    seconds = float(millis) / 1000.0
    if not seconds:
        return None
    return min(max(round(seconds * 1000), INT64[0]), INT64[1])


def _header_fields(raw: bytes, section: SectionFields) -> tuple[bool, int, int]:
    """(durable, priority, ttl ms) of a header section, as proton reads them."""
    start, fields = section
    fast = _header_fast(raw, fields) if fields is not None else None
    if fast is not None:
        return fast
    pos, stop = _list_fields(raw, start, len(raw))
    durable, pos = _bool(raw, pos, stop)
    priority, pos = _ubyte(raw, pos, stop)
    ttl, pos = _uint(raw, pos, stop)
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


_PropertyFields = tuple[str | None, bytes | None, dict[str, bytes | None], str | None, int, int, int, str | None]
_TEXT_FIELDS = {2: "to", 3: "subject", 4: "reply-to", 6: "content-type", 7: "content-encoding",
                10: "group-id", 12: "reply-to-group-id"}


def _properties_fields(raw: bytes, section: SectionFields) -> _PropertyFields:
    """(message-id text, user-id, raw text fields, correlation-id text, expiry, creation,
    group-sequence, None) of a properties section, as proton reads them."""
    start, fields = section
    if fields is not None:
        fast = _properties_fast(raw, fields)
        if fast is not None:
            return fast
    pos, stop = _list_fields(raw, start, len(raw))
    texts: dict[str, bytes | None] = {}
    message_id, pos = _atom_id(raw, pos, stop, "message-id")
    user_id, pos = _binary(raw, pos, stop)
    for name in ("to", "subject", "reply-to"):
        texts[name], pos = _text(raw, pos, stop, (0xA1, 0xB1))
    correlation_id, pos = _atom_id(raw, pos, stop, "correlation-id")
    for name in ("content-type", "content-encoding"):
        texts[name], pos = _text(raw, pos, stop, (0xA3, 0xB3))
    expiry, pos = _timestamp(raw, pos, stop)
    creation, pos = _timestamp(raw, pos, stop)
    texts["group-id"], pos = _text(raw, pos, stop, (0xA1, 0xB1))
    group_sequence, pos = _uint(raw, pos, stop)
    texts["reply-to-group-id"], pos = _text(raw, pos, stop, (0xA1, 0xB1))
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
) -> _PropertyFields | None:
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


def _columns(raw: bytes, header: SectionFields | None, properties: SectionFields | None,
             application: _Properties, nested: bool) -> Decoded:
    durable, priority, ttl = _header_fields(raw, header) if header is not None else (False, 4, 0)
    columns: dict[str, object]
    if properties is None or properties[1] == []:  # none, or a list without fields: all null
        columns = {
            "durable": durable, "priority": priority, "ttl": _ms(ttl) if ttl else None, "message_id": None,
            "user_id": None, "to": None, "subject": None, "reply_to": None, "correlation_id": None,
            "content_type": None, "content_encoding": None, "absolute_expiry_time": None,
            "creation_time": None, "group_id": None, "group_sequence": None, "reply_to_group_id": None,
            "application_properties": application[0],
        }
        return Decoded(columns, None, None, application[1], nested)
    message_id, user_id, texts, correlation_id, expiry, creation, group_sequence, _ = (
        _properties_fields(raw, properties))
    # message_columns reads content-type/encoding first, then the fields in column order.
    get = texts.get
    content_type = _c_string(get("content-type"), "content-type")
    content_encoding = _c_string(get("content-encoding"), "content-encoding")
    to = _c_string(get("to"), "to")
    subject = _c_string(get("subject"), "subject")
    columns = {
        "durable": durable,
        "priority": priority,
        "ttl": _ms(ttl) if ttl else None,
        "message_id": message_id,
        "user_id": user_id or None,
        "to": to,
        "subject": subject,
        "reply_to": _c_string(get("reply-to"), "reply-to"),
        "correlation_id": correlation_id,
        "content_type": content_type,
        "content_encoding": content_encoding,
        "absolute_expiry_time": _ms(expiry) if expiry else None,
        "creation_time": _ms(creation) if creation else None,
        "group_id": _c_string(get("group-id"), "group-id"),
        "group_sequence": group_sequence or None,
        "reply_to_group_id": _c_string(get("reply-to-group-id"), "reply-to-group-id"),
        "application_properties": application[0],
    }
    return Decoded(columns, to, subject, application[1], nested)


# --------------------------------------------------------------------------- application properties


def _application_properties(raw: bytes, pos: int, fields: list[tuple[int, int, int]] | None
                            ) -> _Properties:
    """(the application_properties column, the string-valued properties by string key) of the
    section value at ``pos`` (``fields``: extents of its map's keys and values when the walk
    collected them), as proton's get_object, message_columns and property_value give them.

    Raises:
        MessageDecodeError: text proton cannot decode, an unhashable key.
        InvalidMessage: a value that is not a map (and not empty, zero or null).
    """
    reader = _Reader(raw)
    code = raw[pos]
    if code not in (0xC1, 0xD1):
        value, _ = reader.obj(pos, 0)
        if not _falsy(value):
            raise InvalidMessage(f"application-properties must be a map, not a {_type_name(raw, pos, value)}")
        return [], {}
    if fields is None:
        fields = []
        ValueWalk(raw).compound(code, pos + 1, 1, False, fields)
    column: list[tuple[str, PropertyValue]] = []
    routing: dict[str, str] = {}
    index: dict[object, int] = {}  # a dict keeps the first key (its text) and the last value
    count = len(fields)
    key: object  # a key as compared (reader.key)
    for i in range(0, count, 2):
        code, start, stop = fields[i]
        if code == 0xA1 or code == 0xA3:
            key = text = reader.text(code, start + 2, stop)
        elif code in UNHASHABLE_KEYS:
            raise malformed(start, "an application-properties key that is a binary, list, map, array or described value")
        else:
            key, text, _ = reader.key(start)
        string: str | None = None
        struct_: PropertyValue
        if i + 1 < count:
            code, start, stop = fields[i + 1]
            if code == 0xA1:
                string = reader.text(code, start + 2, stop)
                struct_ = {"type": "string", "long": None, "double": None, "string": string, "bool": None}
            elif code == 0x81 or code == 0x71 or code == 0x55 or code == 0x54:
                struct_ = {"type": "long" if code == 0x81 or code == 0x55 else "int",
                           "long": int.from_bytes(raw[start + 1 : stop], signed=True),
                           "double": None, "string": None, "bool": None}
            elif code == 0x70 or code == 0x52 or code == 0x43:
                # uint: what JavaScript clients (rhea) send for a non-negative whole number
                struct_ = {"type": "uint", "long": int.from_bytes(raw[start + 1 : stop]),
                           "double": None, "string": None, "bool": None}
            elif code == 0x41 or code == 0x42:
                struct_ = {"type": "boolean", "long": None, "double": None, "string": None, "bool": code == 0x41}
            else:
                struct_, string, _ = reader.property(start)
        else:  # an odd count: proton's get_dict gives the last key the value None
            struct_ = _struct("null")
        at = index.get(key)
        if at is None:
            index[key] = len(column)
            column.append((text, struct_))
        else:
            column[at] = (column[at][0], struct_)
        if isinstance(key, str):
            if string is not None:
                routing[key] = string
            else:
                routing.pop(key, None)
    return column, routing


def _struct(kind: str, long: int | None = None, double: float | None = None, string: str | None = None,
            boolean: bool | None = None) -> PropertyValue:
    return {"type": kind, "long": long, "double": double, "string": string, "bool": boolean}


def _falsy(value: object) -> bool:
    """``not value`` of proton's object (Described and Array objects are always true)."""
    if isinstance(value, (_Described, _Array)):
        return False
    return not value


def _type_name(raw: bytes, pos: int, value: object) -> str:
    """type(value).__name__ of the object proton decodes the value at ``pos`` into."""
    code = raw[pos]
    names = {0x40: "NoneType", 0x41: "bool", 0x42: "bool", 0x56: "bool", 0x81: "int", 0x55: "int",
             0x72: "float32", 0x82: "float", 0x94: "decimal128", 0x98: "UUID", 0xA0: "memoryview",
             0xB0: "memoryview", 0xA1: "str", 0xB1: "str", 0xA3: "symbol", 0xB3: "symbol", 0x73: "char",
             0x45: "list", 0xC0: "list", 0xD0: "list", 0xE0: "Array", 0xF0: "Array", 0x00: "Described"}
    return CLASS_NAMES.get(code) or names.get(code) or type(value).__name__


class _Num(int):
    """An AMQP integer as proton's Python classes show it (``ulong(3)``)."""

    name = "long"

    def __repr__(self) -> str:
        return f"{self.name}({int.__repr__(self)})"


_NUM_CLASSES: dict[str, type[_Num]] = {
    name: type(name, (_Num,), {"name": name, "__slots__": ()})
    for name in ("ubyte", "byte", "ushort", "short", "uint", "int32", "ulong", "timestamp", "decimal32", "decimal64")
}


class _Float32(float):
    def __repr__(self) -> str:
        return f"float32({float.__repr__(self)})"


class _Decimal128(bytes):
    def __repr__(self) -> str:
        return f"decimal128({bytes.__repr__(self)})"


class _Symbol(str):
    def __repr__(self) -> str:
        return f"symbol({str.__repr__(self)})"


class _Char(str):
    def __repr__(self) -> str:
        return f"char({str.__repr__(self)})"


class _Binary(bytes):
    """A binary value: unhashable like proton's memoryview (rendered as bytes, not an address)."""

    __hash__ = None  # type: ignore[assignment]


_Object: TypeAlias = (
    "None | bool | int | float | str | bytes | uuid.UUID | _Described | _Array | list[_Object] | dict[_Object, _Object]"
)
"""A value as proton's ``Data.get_object`` returns it (the classes below stand in for proton's)."""


class _Described:
    __slots__ = ("descriptor", "value")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, descriptor: _Object, value: _Object) -> None:
        self.descriptor, self.value = descriptor, value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Described) and (self.descriptor, self.value) == (other.descriptor, other.value)

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


class _Undescribed:
    def __repr__(self) -> str:
        return "UNDESCRIBED"


_UNDESCRIBED = _Undescribed()


class _Array:
    __slots__ = ("descriptor", "elements", "type")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, descriptor: _Object | _Undescribed, type_: int, elements: list[_Object]) -> None:
        self.descriptor, self.type, self.elements = descriptor, type_, elements

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Array) and (self.descriptor, self.type, self.elements) == (
            other.descriptor, other.type, other.elements)

    def __repr__(self) -> str:
        els = "".join(", " + repr(e) for e in self.elements)
        return f"Array({self.descriptor!r}, {self.type!r}{els})"


class _Reader:
    """Decodes already-validated values into objects that compare, hash, print and repr like
    the ones proton's ``Data.get_object`` returns."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def key(self, pos: int) -> tuple[object, str, int]:
        """(key as compared, str() of proton's key object, offset after it)."""
        raw = self.raw
        code = raw[pos]
        if code in (0xA1, 0xA3):
            stop = pos + 2 + raw[pos + 1]
            text = self.text(code, pos + 2, stop)
            return text, text, stop
        value, stop = self.scalar(code, pos + 1)
        return value, _key_text(value), stop

    def property(self, pos: int) -> tuple[PropertyValue, str | None, int]:
        """(PROPERTY_VALUE struct, the value when it is text, offset after it)."""
        raw = self.raw
        code = raw[pos]
        if code in (0xA1, 0xB1, 0xA3, 0xB3):
            start, stop = _extent(raw, code, pos + 1)
            text = self.text(code, start, stop)
            return _struct("string" if code & 0x0F == 1 else "symbol", string=text), text, stop
        if code == 0x00 or code in COMPOUND or code == 0x45:
            value, stop = self.obj(pos, 0)
            kind = ("Described" if isinstance(value, _Described) else "Array" if isinstance(value, _Array)
                    else "dict" if isinstance(value, dict) else "list")
            return _struct(kind, string=str(value)), None, stop
        value, stop = self.scalar(code, pos + 1)
        return _property_struct(code, value), (value if code == 0x73 else None), stop

    def text(self, code: int, start: int, stop: int) -> str:
        try:
            return self.raw[start:stop].decode("utf-8" if code & 0x0F == 1 else "ascii")
        except UnicodeDecodeError:
            check_text(self.raw, code, start, stop)
            raise  # pragma: no cover (check_text raised)

    # The value's class follows from ``code`` (as in proton's decoder) and callers rely on that
    # (``_property_struct``, a char's text); the decode path takes no isinstance checks to tell mypy.
    # Any: one of proton's decoded classes, picked by ``code``
    def scalar(self, code: int, pos: int) -> tuple[Any, int]:
        """A non-compound value whose constructor ``code`` was at ``pos - 1``."""
        raw = self.raw
        width = FIXED.get(code)
        if width is None:
            start, stop = _extent(raw, code, pos)
            if code & 0x0F == 0:
                return _Binary(raw[start:stop]), stop
            text = self.text(code, start, stop)
            return (_Symbol(text) if code & 0x0F == 3 else text), stop
        body = raw[pos : pos + width]
        stop = pos + width
        if code == 0x40:
            return None, stop
        if code in (0x41, 0x42):
            return code == 0x41, stop
        if code == 0x56:
            return body[0] != 0, stop
        if code == 0x45:
            return [], stop
        if code == 0x72:
            return _Float32(FLOAT.unpack(body)[0]), stop
        if code == 0x82:
            return DOUBLE.unpack(body)[0], stop
        if code == 0x73:
            point = int.from_bytes(body)
            if point > 0x10FFFF:
                raise malformed(pos, "a char above U+10FFFF")
            return _Char(chr(point)), stop
        if code == 0x94:
            return _Decimal128(body), stop
        if code == 0x98:
            return uuid.UUID(bytes=body), stop
        number = int.from_bytes(body, signed=code in SIGNED) if body else 0
        name = CLASS_NAMES.get(code)
        return (_NUM_CLASSES[name](number) if name else number), stop

    def obj(self, pos: int, depth: int) -> tuple[_Object, int]:
        """Any value as proton's object."""
        raw = self.raw
        code = raw[pos]
        if code == 0x00:
            descriptor, pos = self.obj(pos + 1, depth + 1)
            value, pos = self.obj(pos, depth + 1)
            return _Described(descriptor, value), pos
        return self.body(code, pos + 1, depth)

    def body(self, code: int, pos: int, depth: int) -> tuple[_Object, int]:
        """The value whose constructor ``code`` was at ``pos - 1`` (or is an array's)."""
        if code not in COMPOUND:
            return self.scalar(code, pos)
        raw = self.raw
        if code in (0xC0, 0xC1, 0xE0):
            count, pos = raw[pos + 1], pos + 2
        else:
            count, pos = int.from_bytes(raw[pos + 4 : pos + 8]), pos + 8
        if code in (0xE0, 0xF0):
            return self.array(pos, count, depth)
        items = []
        for _ in range(count):
            item, pos = self.obj(pos, depth + 1)
            items.append(item)
        if code in (0xC0, 0xD0):
            return items, pos
        out: dict[_Object, _Object] = {}
        for i in range(0, len(items), 2):
            try:
                out[items[i]] = items[i + 1] if i + 1 < len(items) else None
            except TypeError:
                raise malformed(pos, "a map key that is a binary, list, map, array or described value") from None
        return out, pos

    def array(self, pos: int, count: int, depth: int) -> tuple[_Object, int]:
        raw = self.raw
        code = raw[pos]
        pos += 1
        descriptors: list[_Object] = []
        while code == 0x00:
            descriptor, pos = self.scalar(raw[pos], pos + 1)
            descriptors.append(descriptor)
            code = raw[pos]
            pos += 1
        elements = descriptors[1:]  # proton puts further descriptors among the elements
        for _ in range(count):
            element, pos = self.body(code, pos, depth + 1)
            elements.append(element)
        return _Array(descriptors[0] if descriptors else _UNDESCRIBED, PN_TYPE[code], elements), pos


def _extent(raw: bytes, code: int, pos: int) -> tuple[int, int]:
    """(start, stop) of the bytes of the variable-width value whose size field is at ``pos``."""
    if code < 0xB0:
        return pos + 1, pos + 1 + raw[pos]
    return pos + 4, pos + 4 + int.from_bytes(raw[pos : pos + 4])


def _key_text(value: object) -> str:
    """str() of proton's object for a key (``ulong(3)``, ``float32(1.5)``, the text of a symbol)."""
    if isinstance(value, (_Num, _Float32)):
        return repr(value)
    if isinstance(value, _Decimal128):
        return str(bytes(value))  # bytes.__str__: decimal128's repr does not reach str()
    return str(value)


# Any: a scalar of :meth:`_Reader.scalar`, whose class follows from ``code`` (see there)
def _property_struct(code: int, value: Any) -> PropertyValue:
    """property_value (tests/proton_columns.py) of proton's object for a scalar of constructor ``code``."""
    if value is None:
        return _struct("null")
    if isinstance(value, bool):
        return _struct("boolean", boolean=value)
    if code == 0x73:
        return _struct("char", string=str(value))
    if code in (0x72, 0x82):
        return _struct("float" if code == 0x72 else "double", double=float(value))
    if code == 0x94:
        return _struct("binary", string=bytes(value).hex())
    if isinstance(value, _Binary):
        return _struct("binary", string=bytes(value).hex())
    if isinstance(value, uuid.UUID):
        return _struct("uuid", string=str(value))
    name = INT_NAMES[code]
    if name == "timestamp":
        return _struct(name, string=str(int(value)))
    if INT64[0] <= value <= INT64[1]:
        return _struct(name, long=int(value))
    return _struct(name, double=float(value))


def holds_nested_described(raw: bytes | bytearray | memoryview) -> bool:
    """True when ``raw`` (a structurally valid message, else False) holds a described value whose
    value is itself described: the case where proton's Data decodes what follows differently
    from what was encoded (see the module docstring)."""
    raw = bytes(raw)
    walk = ValueWalk(raw)
    pos = 0
    try:
        while pos < walk.end:
            if raw[pos] != 0x00:
                return False
            walk.nodes = 1
            _kind, pos = section_descriptor(walk, pos + 1)
            if pos < walk.end and raw[pos] == 0x00 and described_value_is_described(raw, pos + 1):
                return True
            pos = walk.value(pos, 1, False)
    except MessageDecodeError:
        return False
    return walk.nested
