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

This module is the decoder's entry and its one pass over the sections (:func:`decode`); the
rules it applies are each in a module of their own, all pure and called directly from here (no
layer between, on this hot path):

* sharedsub.core.publish.amqp_types: the type constructors as tables;
* sharedsub.core.publish.amqp_walk: the structural and semantic walk of values, its limits
  (MAX_NODES, MAX_DEPTH) and the MessageDecodeError of a fault at an offset;
* sharedsub.core.publish.amqp_sections: the section codes and which descriptor makes a section;
* sharedsub.core.publish.header_properties (on sharedsub.core.publish.proton_fields, proton's
  positional field readers): the header and properties fields;
* sharedsub.core.publish.application_properties (on sharedsub.core.publish.proton_values,
  values as proton's objects): the application properties column and routing properties.
"""

from __future__ import annotations

from typing import NamedTuple

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
from sharedsub.core.publish.amqp_walk import ValueWalk, malformed, underflow
from sharedsub.core.publish.application_properties import ApplicationProperties, application_properties
from sharedsub.core.publish.header_properties import c_string, header_fields, ms, properties_fields


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
    entries: ApplicationProperties = ([], {})
    not_a_map: InvalidMessage | None = None
    if application is not None:
        try:
            entries = application_properties(raw, *application)
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


def _columns(raw: bytes, header: SectionFields | None, properties: SectionFields | None,
             application: ApplicationProperties, nested: bool) -> Decoded:
    durable, priority, ttl = header_fields(raw, header) if header is not None else (False, 4, 0)
    columns: dict[str, object]
    if properties is None or properties[1] == []:  # none, or a list without fields: all null
        columns = {
            "durable": durable, "priority": priority, "ttl": ms(ttl) if ttl else None, "message_id": None,
            "user_id": None, "to": None, "subject": None, "reply_to": None, "correlation_id": None,
            "content_type": None, "content_encoding": None, "absolute_expiry_time": None,
            "creation_time": None, "group_id": None, "group_sequence": None, "reply_to_group_id": None,
            "application_properties": application[0],
        }
        return Decoded(columns, None, None, application[1], nested)
    message_id, user_id, texts, correlation_id, expiry, creation, group_sequence, _ = (
        properties_fields(raw, properties))
    # message_columns reads content-type/encoding first, then the fields in column order.
    get = texts.get
    content_type = c_string(get("content-type"), "content-type")
    content_encoding = c_string(get("content-encoding"), "content-encoding")
    to = c_string(get("to"), "to")
    subject = c_string(get("subject"), "subject")
    columns = {
        "durable": durable,
        "priority": priority,
        "ttl": ms(ttl) if ttl else None,
        "message_id": message_id,
        "user_id": user_id or None,
        "to": to,
        "subject": subject,
        "reply_to": c_string(get("reply-to"), "reply-to"),
        "correlation_id": correlation_id,
        "content_type": content_type,
        "content_encoding": content_encoding,
        "absolute_expiry_time": ms(expiry) if expiry else None,
        "creation_time": ms(creation) if creation else None,
        "group_id": c_string(get("group-id"), "group-id"),
        "group_sequence": group_sequence or None,
        "reply_to_group_id": c_string(get("reply-to-group-id"), "reply-to-group-id"),
        "application_properties": application[0],
    }
    return Decoded(columns, to, subject, application[1], nested)


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
