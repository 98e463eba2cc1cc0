"""tests/proton_columns.check_encoding (the decoder's oracle): what a published transfer must be before it is stored."""

from __future__ import annotations

import pytest
from proton import Described, Message, symbol, ulong

from tests.proton_columns import check_encoding


@pytest.mark.parametrize(
    "message",
    [
        Message(body="text"),
        Message(body=b"\x00\x01binary"),
        Message(body=None),
        Message(body=[1, "two", 3.0]),
        Message(body="x", properties={"k": 1}, subject="s", durable=True, priority=7,
                annotations={symbol("x-opt-jms-msg-type"): 5}, instructions={symbol("i"): 1}),
    ],
    ids=["value", "data", "null-value", "list-value", "every-section"],
)
def test_encoded_messages_pass(message: Message) -> None:
    check_encoding(message.encode())


def _described(code: int, value: object) -> bytes:
    from proton import Data

    data = Data()
    data.put_object(Described(ulong(code), value))
    return data.encode()


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (bytes([0x00, 0x53, 0x77, 0xA1, 0x10, 0x61, 0x62]), "undecodable"),  # string claims 16 bytes, has 2
        (b"\xa1\x01a", "not a described type"),
        (_described(0x99, "x"), "not a message section"),
        (Message(body="ok").encode() + b"\x00\x53", "undecodable"),  # trailing garbage after a good section
    ],
    ids=["truncated-value", "bare-string", "unknown-descriptor", "trailing-bytes"],
)
def test_malformed_transfers_are_refused(raw: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_encoding(raw)
