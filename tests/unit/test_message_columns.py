"""tests/proton_columns.message_columns (the decoder's oracle) on messages proton decodes but cannot read whole."""

from __future__ import annotations

import pytest
from proton import Data, Described, Message, ulong

from sharedsub.core.errors import MessageDecodeError
from tests.proton_columns import check_encoding, message_columns

# properties fields (AMQP 1.0 §3.2.4) that proton hands out as str, decoding UTF-8 only when read
_TEXT_FIELDS = {2: "to", 3: "subject", 4: "reply-to", 10: "group-id", 12: "reply-to-group-id"}


def _with_bad_utf8(index: int) -> bytes:
    """A message whose properties field ``index`` is a str8 holding the byte 0xB0 (not UTF-8)."""
    fields = [None] * index + ["\x00"]
    data = Data()
    data.put_object(Described(ulong(0x73), fields))
    data.put_object(Described(ulong(0x77), "body"))
    raw = data.encode()
    marker = b"\xa1\x01\x00"  # str8 of one NUL, the placeholder put above
    assert raw.count(marker) == 1
    return raw.replace(marker, b"\xa1\x01\xb0")


@pytest.mark.parametrize("index", sorted(_TEXT_FIELDS), ids=list(_TEXT_FIELDS.values()))
def test_a_properties_string_that_is_not_utf8_is_a_decode_error(index: int) -> None:
    """Found by tests/fuzz: proton decodes the message, then raised UnicodeDecodeError from
    message_columns, which the handler did not expect: it closed the publisher's connection
    with amqp:internal-error instead of rejecting the one transfer."""
    raw = _with_bad_utf8(index)
    check_encoding(raw)
    msg = Message()
    msg.decode(raw)
    with pytest.raises(MessageDecodeError, match=f"properties.{_TEXT_FIELDS[index]} is not valid UTF-8") as info:
        message_columns(msg)
    assert str(info.value.condition) == "amqp:decode-error"


def test_content_type_and_encoding_are_none_when_absent() -> None:
    """Found by tests/fuzz: proton's Message.content_type is symbol(None) == 'None' when the
    field is absent, so every stored message said content_type 'None' (and `sharedsub
    subscriptions show` printed it)."""
    msg = Message()
    msg.decode(Message(body="x").encode())
    columns = message_columns(msg)
    assert columns["content_type"] is None
    assert columns["content_encoding"] is None
    msg.decode(Message(body="x", content_type="text/plain", content_encoding="gzip").encode())
    columns = message_columns(msg)
    assert (columns["content_type"], columns["content_encoding"]) == ("text/plain", "gzip")


@pytest.mark.parametrize("value", [b"", b"id-1", b"\xff\x00"], ids=["empty", "ascii", "not-utf8"])
def test_binary_message_and_correlation_ids_are_their_bytes(value: bytes) -> None:
    """Found by tests/fuzz: proton decodes a binary message-id / correlation-id to a memoryview,
    which id_text rendered as '<memory at 0x...>' (so JMSMessageID / JMSCorrelationID selectors
    could never match a binary id)."""
    msg = Message(body="x")
    msg.id = value
    msg.correlation_id = value
    decoded = Message()
    decoded.decode(msg.encode())
    columns = message_columns(decoded)
    expected = value.decode("utf-8", "replace")
    assert (columns["message_id"], columns["correlation_id"]) == (expected, expected)
