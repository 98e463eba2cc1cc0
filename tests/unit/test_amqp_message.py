"""sharedsub.core.publish.amqp_message against the path it replaces (check_encoding, proton's Message.decode,
tests/proton_columns.message_columns): differential tests on messages proton encodes, and table tests of
malformed transfers, each refused with the typed error the old path gave."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import proton
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    Array,
    Data,
    Described,
    Message,
    byte,
    char,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

from sharedsub.core.errors import InvalidMessage, MessageDecodeError
from sharedsub.core.publish import amqp_message
from sharedsub.core.publish.amqp_walk import MAX_DEPTH
from tests.fuzz import messages as m
from tests.message_oracle import assert_same, decoder_outcome, proton_outcome

DIFFERENTIAL = settings(max_examples=300, deadline=None, database=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _section(code: Any, value: Any) -> bytes:
    return m.encode_section(code, value)


def _map_section(code: int, pairs: list[tuple[Any, Any]]) -> bytes:
    """A section holding a map of ``pairs`` as given (equal keys included)."""
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(code)
    data.put_map()
    data.enter()
    for key, value in pairs:
        data.put_object(key)
        data.put_object(value)
    data.exit()
    data.exit()
    return bytes(data.encode())


def _value(value: Any) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def _jms_text_message() -> bytes:
    msg = Message(body="x" * 1024, durable=True, id="ID:1:1:1-1", address="orders", subject="s",
                  creation_time=1_763_900_000.123, properties={"routing-key": "eu.new", "n": 12, "ok": True},
                  annotations={symbol("x-opt-jms-msg-type"): byte(5), symbol("x-opt-jms-dest"): byte(1)})
    return bytes(msg.encode())


# ------------------------------------------------------------------ messages built with proton.Message


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy``'s values or None."""
    return st.one_of(st.none(), strategy)


ids = st.one_of(st.none(), st.integers(0, 2**64 - 1).map(ulong), st.uuids(), st.binary(max_size=16), m.text)
millis = st.integers(1, 2**53)  # proton's setters take float seconds


@st.composite
def proton_messages(draw: st.DrawFn) -> Message:
    """A proton.Message with any header and properties field, application properties of every
    type, annotations, and a body of each kind."""
    msg = Message()
    msg.durable = draw(st.booleans())
    msg.priority = draw(st.integers(0, 255))
    msg.ttl = draw(st.integers(0, 2**32 - 1)) / 1000
    msg.first_acquirer = draw(st.booleans())
    msg.delivery_count = draw(st.integers(0, 2**32 - 1))
    msg.id = draw(ids)
    msg.correlation_id = draw(ids)
    if draw(st.booleans()):
        msg.user_id = draw(st.binary(max_size=12))
    for attribute in ("address", "subject", "reply_to", "group_id", "reply_to_group_id"):
        value = draw(optional(m.text))
        if value is not None:
            setattr(msg, attribute, value)
    for attribute in ("content_type", "content_encoding"):
        value = draw(optional(m.ascii_text))
        if value is not None:
            setattr(msg, attribute, value)
    for attribute in ("expiry_time", "creation_time"):
        value = draw(optional(millis))
        if value is not None:
            setattr(msg, attribute, value / 1000)
    msg.group_sequence = draw(st.integers(0, 2**32 - 1))
    if draw(st.booleans()):
        msg.properties = draw(st.dictionaries(m.text, m.property_values, max_size=6))
    if draw(st.booleans()):
        msg.annotations = draw(st.dictionaries(m.ascii_text.map(symbol), m.values, max_size=3))
    if draw(st.booleans()):
        msg.instructions = draw(st.dictionaries(m.ascii_text.map(symbol), m.values, max_size=3))
    body = draw(st.sampled_from(["none", "text", "data", "sequence", "value"]))
    if body == "text":
        msg.body = draw(m.text)
    elif body == "data":
        msg.body = draw(st.binary(max_size=64))
        msg.inferred = True
    elif body == "sequence":
        msg.body = draw(st.lists(m.values, max_size=4))
        msg.inferred = True
    elif body == "value":
        msg.body = draw(m.values)
    return msg


@DIFFERENTIAL
@given(proton_messages())
def test_messages_proton_encodes_read_as_message_columns_reads_them(msg: Message) -> None:
    raw = bytes(msg.encode())
    outcome = assert_same(raw)
    if outcome.kind == "ok" and not amqp_message.holds_nested_described(raw):
        assert outcome.columns is not None
        assert outcome.columns["durable"] is msg.durable
        assert outcome.to == (None if msg.address is None else msg.address.split("\x00")[0])


@DIFFERENTIAL
@given(m.header(False), m.properties(False), m.property_maps, st.sampled_from(m.SECTION_CODES[5:8]), m.values)
def test_every_field_of_every_type_reads_as_proton_reads_it(header: list[Any], props: list[Any],
                                                            app: dict[Any, Any], body: int, value: Any) -> None:
    """Sections built value by value (keys of any type, ids of every type) through proton's Data."""
    raw = _section(m.HEADER, header) + _section(m.PROPERTIES, props) + _section(m.APPLICATION_PROPERTIES, app)
    raw += _section(body, value if body != m.DATA else b"body")
    assert_same(raw)


@DIFFERENTIAL
@given(st.lists(st.tuples(st.sampled_from(m.SECTION_CODES), m.values), max_size=5))
def test_sections_holding_values_of_any_type_read_as_proton_reads_them(secs: list[tuple[int, Any]]) -> None:
    assert_same(m.encode(secs))


# ------------------------------------------------------------------ table tests: what proton does


def _prop(*fields: Any) -> bytes:
    return _section(m.PROPERTIES, list(fields))


BODY = _section(m.VALUE, "body")

ACCEPTED: list[tuple[str, bytes]] = [
    ("empty transfer", b""),
    ("jms text message", _jms_text_message()),
    ("bare data", bytes(Message(body=b"\x00" * 1024, inferred=True).encode())),
    ("symbolic descriptors are sections proton ignores",
     _section(symbol("amqp:properties:list"), ["id", None, "to"]) + _section(symbol("amqp:amqp-value:*"), "x")),
    ("a string descriptor equal to a section name",
     bytes.fromhex("00a1") + bytes([len(b"amqp:footer:map")]) + b"amqp:footer:map" + bytes.fromhex("c10100")),
    ("a uint descriptor 0x73 is a section proton ignores", bytes.fromhex("00527340") + BODY),
    ("a double descriptor 115.0", b"\x00\x82" + struct.pack(">d", 115.0) + b"\x40"),
    ("the last properties section wins", _prop("a", None, "first") + _prop("b") + BODY),
    # rhea sends empty header and properties lists as list0 (0x45)
    ("header and properties as list0", bytes.fromhex("00537045") + bytes.fromhex("00537345") + BODY),
    ("properties list0 after a properties section with fields",
     _prop("a", None, "to", "subject") + bytes.fromhex("00537345") + BODY),
    ("properties list0 before a properties section with fields",
     bytes.fromhex("00537345") + _prop("a", None, "to", "subject") + BODY),
    ("the last header section wins", _section(m.HEADER, [True, ubyte(9)]) + _section(m.HEADER, [None]) + BODY),
    ("a non-timestamp expiry time makes proton read on inside it",
     _prop(None, None, None, None, None, None, None, None, uint(0x00A10161), None, "g") + BODY),
    ("message-id types proton drops", _prop(uint(7), None, None, None, None, symbol("corr")) + BODY),
    ("message-id of type long is skipped", _prop(7, None, "to") + BODY),
    ("binary ids read as UTF-8 with replacement", _prop(b"\xff\x00a", None, None, None, None, b"x") + BODY),
    ("strings stop at NUL", _prop(None, None, "to\x00rest", "sub\x00ject") + BODY),
    ("an empty to is not an absent one", _prop(None, None, "") + BODY),
    ("a properties string of the wrong type is absent", _prop(None, None, symbol("to"), 5) + BODY),
    ("content-type as a string is absent", _prop(None, None, None, None, None, None, "text/plain") + BODY),
    ("group-sequence above int32", _prop(*([None] * 11), uint(2**32 - 1)) + BODY),
    ("header priority of the wrong type is the default",
     _section(m.HEADER, [True, uint(9), uint(1000)]) + BODY),
    ("header as a map", _section(m.HEADER, {symbol("durable"): True}) + BODY),
    ("properties as a described list", _section(m.PROPERTIES, Described(ulong(1), ["id"])) + BODY),
    ("application-properties with equal keys of different types",
     _map_section(m.APPLICATION_PROPERTIES, [(1, "a"), (ulong(1), "b"), (True, "c"), (1.0, "d"), ("k", 1),
                                             (float("nan"), 1), (float("nan"), 2), (symbol("k"), 2)]) + BODY),
    ("application-properties keys of every hashable type",
     _section(m.APPLICATION_PROPERTIES, {None: 1, ubyte(2): 2, byte(-3): 3, timestamp(4): 4, proton.float32(1.5): 5,
                                         2.5: 6, char("c"): 7, symbol("s"): 8, uuid.UUID(int=9): 9,
                                         proton.decimal32(10): 10, proton.decimal128(b"0123456789abcdef"): 11}) + BODY),
    ("application-properties values of every type",
     _section(m.APPLICATION_PROPERTIES, {"n": None, "b": False, "ub": ubyte(1), "by": byte(-1), "us": proton.ushort(2),
                                         "sh": proton.short(-2), "ui": uint(3), "i": proton.int32(-3), "ul": ulong(2**64 - 1),
                                         "l": -(2**63), "t": timestamp(-5), "f": proton.float32(0.1), "d": float("nan"),
                                         "d32": proton.decimal32(7), "d64": proton.decimal64(2**64 - 1),
                                         "d128": proton.decimal128(b"\x01" * 16), "c": char("\U0010ffff"),
                                         "u": uuid.UUID(int=1), "bin": b"\x00\xff", "s": "text", "sym": symbol("x"),
                                         "list": [1, symbol("a"), [char("c")]], "map": {symbol("k"): [ulong(1)], 2: None},
                                         "desc": Described(symbol("x"), [1]),
                                         "arr": Array(proton.UNDESCRIBED, Data.INT, 1, 2),
                                         "darr": Array(symbol("d"), Data.STRING, "a", "b")}) + BODY),
    ("an odd count in application-properties", bytes.fromhex("005374c10401a10161") + BODY),
    ("routing key from a symbol value", _section(m.APPLICATION_PROPERTIES, {"routing-key": symbol("r.k")}) + BODY),
    ("routing key collapsed to a non-string", _section(m.APPLICATION_PROPERTIES, {symbol("routing-key"): "a"})
     + BODY + _section(m.APPLICATION_PROPERTIES, {"routing-key": 1, "routing_key": "b"})),
    ("empty application-properties of other types", _section(m.APPLICATION_PROPERTIES, []) + BODY),
    ("zero as application-properties", _section(m.APPLICATION_PROPERTIES, 0) + BODY),
    ("bad UTF-8 in a footer (proton never reads it)",
     _section(m.FOOTER, {symbol("k"): "\x00"}).replace(b"\xa1\x01\x00", b"\xa1\x01\xff")),
    ("bad UTF-8 in a body that another body section follows",
     _section(m.VALUE, "\x00").replace(b"\xa1\x01\x00", b"\xa1\x01\xff") + BODY),
    ("an array of 65000 nulls", _section(m.VALUE, None)[:-1] + b"\xf0" + struct.pack(">II", 5, 65000) + b"\x40"),
    ("a described array with two descriptors",
     bytes.fromhex("005374c10f02a10161e009010053010053025207") + BODY),
]


@pytest.mark.parametrize("raw", [raw for _, raw in ACCEPTED], ids=[name for name, _ in ACCEPTED])
def test_accepted_transfers_read_as_proton_reads_them(raw: bytes) -> None:
    outcome = assert_same(raw)
    assert outcome.kind == "ok", outcome


def test_the_jms_message_columns() -> None:
    decoded = amqp_message.decode(_jms_text_message())
    columns = decoded.columns
    assert (columns["durable"], columns["priority"], columns["message_id"], columns["to"]) == (True, 4, "ID:1:1:1-1", "orders")
    assert columns["creation_time"] == 1_763_900_000_123
    assert columns["application_properties"][1] == (
        "n", {"type": "long", "long": 12, "double": None, "string": None, "bool": None})
    assert decoded.routing_properties == {"routing-key": "eu.new"}
    assert (decoded.to, decoded.subject, decoded.nested_described) == ("orders", "s", False)


def test_a_timestamp_field_of_another_type_is_not_skipped() -> None:
    """proton reads absolute-expiry-time as a timestamp only, without skipping another type:
    after the uint's constructor (0x70) it reads creation-time from the uint's first byte (0x00,
    not a timestamp either), group-id from the rest of the uint (a1 01 61: "a"), group-sequence
    from the null that was creation-time, and reply-to-group-id from group-id's "g"."""
    raw = _prop(None, None, None, None, None, None, None, None, uint(0x00A10161), None, "g") + BODY
    new = decoder_outcome(raw)
    assert new == proton_outcome(raw)
    assert new.columns is not None
    assert (new.columns["group_id"], new.columns["reply_to_group_id"]) == ("a", "g")


def test_binary_property_values_are_stored_as_binary() -> None:
    """Documented divergence: proton handed out a memoryview, stored as '<memory at 0x...>'."""
    raw = _section(m.APPLICATION_PROPERTIES, {"bin": b"\x00\xff"}) + BODY
    assert amqp_message.decode(raw).columns["application_properties"] == [
        ("bin", {"type": "binary", "long": None, "double": None, "string": "00ff", "bool": None})]


# ------------------------------------------------------------------ table tests: refused transfers

_BAD_UTF8 = b"\xa1\x01\xff"


def _bad_utf8(raw: bytes) -> bytes:
    assert raw.count(b"\xa1\x01\x00") == 1
    return raw.replace(b"\xa1\x01\x00", _BAD_UTF8)


def _bad_symbol(raw: bytes) -> bytes:
    assert raw.count(b"\xa3\x01q") == 1
    return raw.replace(b"\xa3\x01q", b"\xa3\x01\xe9")


REFUSED: list[tuple[str, bytes, type[Exception], str]] = [
    ("a bare string", b"\xa1\x01a", MessageDecodeError, "not a message section"),
    ("an unknown descriptor", _section(0x99, "x"), MessageDecodeError, "not a message section"),
    ("a ulong0 descriptor", b"\x00\x44\x40", MessageDecodeError, "not a message section"),
    ("a symbol descriptor that is no section", _section(symbol("amqp:nothing:list"), []), MessageDecodeError,
     "not a message section"),
    ("a list descriptor", b"\x00\xc0\x01\x00\x40", MessageDecodeError, "cannot be a descriptor"),
    ("a described descriptor", b"\x00\x00\x53\x77\x40\x40", MessageDecodeError, "cannot be a descriptor"),
    ("a list0 descriptor", b"\x00\x45\x40", MessageDecodeError, "not a message section"),
    ("a descriptor symbol that is not ASCII", b"\x00\xa3\x01\xe9\x40", MessageDecodeError, "not ASCII"),
    ("trailing bytes", BODY + b"\x00\x53", MessageDecodeError, "past the end"),
    ("an unknown constructor", b"\x00\x53\x77\x01", MessageDecodeError, "unknown constructor 0x01"),
    ("an unknown array element constructor", b"\x00\x53\x77\xe0\x02\x01\x01", MessageDecodeError, "unknown array element"),
    ("a string longer than the transfer", b"\x00\x53\x77\xb1\xff\xff\xff\xff", MessageDecodeError, "past the end"),
    ("a list longer than the transfer", b"\x00\x53\x77\xd0\x7f\xff\xff\xff\x00\x00\x00\x01\x40",
     MessageDecodeError, "past the end"),
    ("a list count beyond its bytes", b"\x00\x53\x77\xc0\x02\xff\x40", MessageDecodeError, "past the end"),
    ("a list8 of size 0", b"\x00\x53\x77\xc0\x00\x00", MessageDecodeError, "no room for the count"),
    ("an array of 2^32-1 nulls", b"\x00\x53\x77\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40", MessageDecodeError,
     "more than 65535 values"),
    ("65536 values in one section", _section(m.VALUE, None)[:-1] + b"\xf0" + struct.pack(">II", 5, 65534) + b"\x40",
     MessageDecodeError, "more than 65535 values"),
    ("application-properties as a list", _section(m.APPLICATION_PROPERTIES, ["a"]) + BODY, InvalidMessage,
     "must be a map, not a list"),
    ("application-properties as a string", _section(m.APPLICATION_PROPERTIES, "a") + BODY, InvalidMessage,
     "not a str"),
    ("application-properties as a ulong", _section(m.APPLICATION_PROPERTIES, ulong(3)) + BODY, InvalidMessage,
     "not a ulong"),
    ("application-properties described", _section(m.APPLICATION_PROPERTIES, Described(ulong(1), {})) + BODY,
     InvalidMessage, "not a Described"),
    ("application-properties as an array", _section(m.APPLICATION_PROPERTIES, Array(proton.UNDESCRIBED, Data.INT))
     + BODY, InvalidMessage, "not a Array"),
    ("a list key in application-properties", bytes.fromhex("005374c1040245540l".replace("l", "1")) + BODY,
     MessageDecodeError, "key that is a binary"),
    ("a binary key in application-properties", _section(m.APPLICATION_PROPERTIES, {"a": 1}).replace(
        b"\xa1\x01a", b"\xa0\x01a") + BODY, MessageDecodeError, "key that is a binary"),
    ("a binary map key in the body", _section(m.VALUE, {"a": 1}).replace(b"\xa1\x01a", b"\xa0\x01a"),
     MessageDecodeError, "key that is a binary"),
    ("bad UTF-8 in an application-properties value", _bad_utf8(_section(m.APPLICATION_PROPERTIES, {"k": "\x00"})),
     MessageDecodeError, "not UTF-8"),
    ("bad UTF-8 nested in an application-properties value",
     _bad_utf8(_section(m.APPLICATION_PROPERTIES, {"k": [1, {"\x00": 2}]})), MessageDecodeError, "not UTF-8"),
    ("bad UTF-8 in the body", _bad_utf8(_section(m.VALUE, "\x00")), MessageDecodeError, "not UTF-8"),
    ("bad UTF-8 in a message annotation", _bad_utf8(_section(m.MESSAGE_ANNOTATIONS, {symbol("k"): "\x00"})) + BODY,
     MessageDecodeError, "not UTF-8"),
    ("bad UTF-8 in a delivery annotation", _bad_utf8(_section(m.DELIVERY_ANNOTATIONS, {symbol("k"): "\x00"})) + BODY,
     MessageDecodeError, "not UTF-8"),
    ("a symbol that is not ASCII in the body", _bad_symbol(_section(m.VALUE, symbol("q"))), MessageDecodeError,
     "not ASCII"),
    ("a symbol that is not ASCII in an annotation key", _bad_symbol(_section(m.MESSAGE_ANNOTATIONS, {symbol("q"): 1})),
     MessageDecodeError, "not ASCII"),
    ("a char above U+10FFFF in the body", b"\x00\x53\x77\x73\x00\x11\x00\x00", MessageDecodeError, r"above U\+10FFFF"),
    ("bad UTF-8 in properties.to", _bad_utf8(_prop(None, None, "\x00")) + BODY, MessageDecodeError,
     "properties.to is not valid UTF-8"),
    ("bad UTF-8 in properties.subject", _bad_utf8(_prop(None, None, None, "\x00")) + BODY, MessageDecodeError,
     "properties.subject is not valid UTF-8"),
    ("bad UTF-8 in a string message-id", _bad_utf8(_prop("\x00")) + BODY, MessageDecodeError,
     "properties.message-id is not valid UTF-8"),
    ("bad UTF-8 in properties.content-type", _prop(None, None, None, None, None, None, symbol("q")).replace(
        b"\xa3\x01q", b"\xa3\x01\xff") + BODY, MessageDecodeError, "properties.content-type is not valid UTF-8"),
    ("bad UTF-8 in properties.group-id after a NUL-free prefix", _bad_utf8(_prop(*([None] * 10), "\x00")) + BODY,
     MessageDecodeError, "properties.group-id is not valid UTF-8"),
]


@pytest.mark.parametrize(("raw", "error", "text"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_malformed_transfers_are_refused_as_before(raw: bytes, error: type[Exception], text: str) -> None:
    with pytest.raises(error, match=text) as info:
        amqp_message.decode(raw)
    assert info.value.description.startswith(("transfer is not a valid AMQP message", "properties.", "application-"))
    old = proton_outcome(raw)
    assert old.kind == ("invalid" if error is InvalidMessage else "decode-error"), old


DIVERGENT: list[tuple[str, bytes, str]] = [
    ("a list size that takes in the next section", bytes.fromhex("005377c006014000537840"), "disagrees with its elements"),
    ("a list size shorter than its elements", b"\x00\x53\x73\xc0\x01\x02\x40\x40" + BODY, "disagrees with its elements"),
    ("a map size shorter than its elements", bytes.fromhex("005374c102024040") + BODY, "disagrees with its elements"),
]


@pytest.mark.parametrize(("raw", "text"), [r[1:] for r in DIVERGENT], ids=[r[0] for r in DIVERGENT])
def test_sizes_that_disagree_with_their_elements_are_refused(raw: bytes, text: str) -> None:
    """Documented divergence: proton accepts these (and misreads the sections after them)."""
    with pytest.raises(MessageDecodeError, match=text):
        amqp_message.decode(raw)
    assert proton_outcome(raw).kind == "ok"


def test_values_nested_deeper_than_the_limit_are_refused() -> None:
    raw = b"\x00\x53\x77" + _value([[[[[[[[[[1]]]]]]]]]])
    assert amqp_message.decode(raw).columns["durable"] is False
    deep: Any = 1
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    raw = b"\x00\x53\x77" + _value(deep)
    with pytest.raises(MessageDecodeError, match="nested deeper than"):
        amqp_message.decode(raw)


def test_a_nested_described_value_ends_proton_s_walk() -> None:
    """A section whose value is described twice: proton ignores it and every section after it."""
    nested = _section(m.VALUE, Described(ulong(1), Described(ulong(2), "x")))
    raw = nested + _prop("id", None, "to")
    decoded = amqp_message.decode(raw)
    assert decoded.nested_described and amqp_message.holds_nested_described(raw)
    assert decoded.columns["message_id"] is None and decoded.to is None
    assert proton_outcome(raw).columns == decoded.columns


# ------------------------------------------------------------------ truncation and mutation of a sample


def test_every_truncation_of_a_sample_message_is_refused_or_read_as_proton_reads_it() -> None:
    raw = bytes(Message(body="x" * 40, durable=True, id=uuid.UUID(int=5), address="t", subject="s",
                        properties={"k": "v", "n": 1}, annotations={symbol("a"): 1}).encode()) + _section(m.FOOTER, {})
    for cut in range(len(raw) + 1):
        assert_same(raw[:cut])


def test_every_single_byte_change_of_a_sample_message_agrees_with_proton() -> None:
    raw = bytes(Message(body="xy", durable=True, id="i", address="t", subject="s", creation_time=1.5,
                        properties={"k": "v", "n": 1}, annotations={symbol("a"): 1}).encode())
    for at in range(len(raw)):
        for value in (0x00, 0x40, 0x41, 0x53, 0x80, 0xA1, 0xB1, 0xC0, 0xD1, 0xE0, 0xFF, raw[at] ^ 1):
            mutated = raw[:at] + bytes([value]) + raw[at + 1 :]
            assert_same(mutated)
