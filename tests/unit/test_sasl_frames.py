"""SASL frames (sharedsub/core/security/sasl_frames.py) as tables, and checked against proton's own codec."""

from __future__ import annotations

import struct

import pytest
from proton import UNDESCRIBED, Array, Data, Described, symbol, ubyte, ulong

from sharedsub.core.security import sasl_frames as sf


def _proton_frame(descriptor: object, fields: list[object]) -> bytes:
    """A SASL frame whose body proton encodes (how proton-based clients send them)."""
    data = Data()
    data.put_object(Described(descriptor, fields))
    body = data.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


def _proton_decode(frame: bytes) -> object:
    data = Data()
    data.decode(frame[8:])
    data.rewind()
    data.next()
    got = data.get_object()  # binaries are memoryviews into ``data``: copy them while it lives
    return Described(got.descriptor, [_plain(v) for v in got.value])


def _plain(value: object) -> object:
    if isinstance(value, Array):
        return list(value.elements)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


FRAMES = [
    # our encoding -> (code, fields as decoded)
    (sf.mechanisms(["PLAIN", "SCRAM-SHA-256"]), sf.MECHANISMS, (["PLAIN", "SCRAM-SHA-256"],)),
    (sf.mechanisms([]), sf.MECHANISMS, ([],)),
    (sf.init("PLAIN", b"\0u\0p"), sf.INIT, ("PLAIN", b"\0u\0p")),
    (sf.init("ANONYMOUS", None, "host"), sf.INIT, ("ANONYMOUS", None, "host")),
    (sf.init("EXTERNAL"), sf.INIT, ("EXTERNAL",)),
    (sf.challenge(b"r=abc"), sf.CHALLENGE, (b"r=abc",)),
    (sf.response(b""), sf.RESPONSE, (b"",)),
    (sf.outcome(sf.OK, b"v=xyz"), sf.OUTCOME, (0, b"v=xyz")),
    (sf.outcome(sf.AUTH), sf.OUTCOME, (1,)),
]


@pytest.mark.parametrize(("wire", "code", "fields"), FRAMES)
def test_round_trip_and_partial_frames(wire: bytes, code: int, fields: tuple[object, ...]) -> None:
    frame, used = sf.decode(wire)
    assert frame is not None and used == len(wire)
    assert (frame.code, frame.fields) == (code, fields)
    for cut in range(len(wire)):  # every partial frame asks for more
        assert sf.decode(wire[:cut]) == (None, 0)


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (sf.mechanisms(["PLAIN", "ANONYMOUS"]),
         Described(ulong(0x40), [Array(UNDESCRIBED, Data.SYMBOL, symbol("PLAIN"), symbol("ANONYMOUS"))])),
        (sf.challenge(b"r=1"), Described(ulong(0x42), [b"r=1"])),
        (sf.outcome(sf.OK, b"v=2"), Described(ulong(0x44), [ubyte(0), b"v=2"])),
        (sf.outcome(sf.AUTH), Described(ulong(0x44), [ubyte(1)])),
    ],
)
def test_proton_reads_what_we_write(wire: bytes, expected: Described) -> None:
    got = _proton_decode(wire)
    assert isinstance(got, Described) and got.descriptor == expected.descriptor
    assert [_plain(v) for v in got.value] == [_plain(v) for v in expected.value]


@pytest.mark.parametrize(
    ("descriptor", "fields", "code", "decoded"),
    [
        (ulong(0x41), [symbol("PLAIN"), b"\0alice\0pw", "localhost"], sf.INIT, ("PLAIN", b"\0alice\0pw", "localhost")),
        (ulong(0x41), [symbol("ANONYMOUS"), None, None], sf.INIT, ("ANONYMOUS", None, None)),
        (ulong(0x43), [b"c=biws,r=x,p=y"], sf.RESPONSE, (b"c=biws,r=x,p=y",)),
        (symbol("amqp:sasl-init:list"), [symbol("EXTERNAL"), b""], sf.INIT, ("EXTERNAL", b"")),
        (ulong(0x40), [symbol("PLAIN")], sf.MECHANISMS, ("PLAIN",)),  # a single symbol, not an array
        (ulong(0x41), [symbol("X" * 300), b"y" * 300], sf.INIT, ("X" * 300, b"y" * 300)),  # 32-bit widths
    ],
)
def test_we_read_what_proton_writes(descriptor: object, fields: list[object], code: int, decoded: tuple[object, ...]) -> None:
    frame, _ = sf.decode(_proton_frame(descriptor, fields))
    assert frame is not None and (frame.code, frame.fields) == (code, decoded)


def test_mechanism_list_of_one_symbol_or_an_array() -> None:
    one, _ = sf.decode(_proton_frame(ulong(0x40), [symbol("PLAIN")]))
    many, _ = sf.decode(sf.mechanisms(["A", "B"]))
    assert one is not None and many is not None
    assert (sf.mechanism_list(one), sf.mechanism_list(many)) == (["PLAIN"], ["A", "B"])


def test_empty_frame_has_code_zero() -> None:
    assert sf.decode(b"\x00\x00\x00\x08\x02\x01\x00\x00") == (sf.Frame(0, ()), 8)


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (b"\x00\x00\x00\x10\x02\x00\x00\x00" + b"\x00" * 8, "not SASL"),  # an AMQP frame (type 0)
        (b"\x00\x00\x00\x04\x02\x01\x00\x00", "bad frame header"),
        (b"\x00\x10\x00\x00\x02\x01\x00\x00", "exceeds"),
        (b"\x00\x00\x00\x0a\x02\x01\x00\x00\x00\x53", "truncated"),
        (b"\x00\x00\x00\x0c\x02\x01\x00\x00\x00\x53\x50\x45", "unknown SASL performative"),
        (b"\x00\x00\x00\x0b\x02\x01\x00\x00\x00\x53\x41", "truncated"),
        (b"\x00\x00\x00\x0c\x02\x01\x00\x00\x00\x53\x41\x40", "not one described list"),
        (_proton_frame(ulong(0x41), [1.5]), "not used by SASL"),  # a double
    ],
)
def test_malformed_frames(wire: bytes, error: str) -> None:
    with pytest.raises(sf.FrameError, match=error):
        sf.decode(wire)
