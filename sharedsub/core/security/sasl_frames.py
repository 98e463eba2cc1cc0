"""AMQP 1.0 SASL frames (spec part 5.3): encode and decode, in pure Python.

A frame on the wire is::

    size:uint32  doff:uint8 (>= 2)  type:uint8 (1 = SASL)  channel:uint16 (ignored)  body

and its body is one described list: sasl-mechanisms 0x40, sasl-init 0x41, sasl-challenge 0x42,
sasl-response 0x43, sasl-outcome 0x44 (the descriptor may also be the symbolic name,
``amqp:sasl-init:list``...).

The codec knows only the AMQP types these five performatives carry (spec 1.6): null, boolean,
ubyte, ushort, uint, ulong, symbol, string, binary, and arrays of symbols. Anything else in a
body is a :class:`FrameError`. We always encode with the 32-bit widths (list32, sym32, str32,
vbin32, array32) and decode every width. tests/unit/test_sasl_frames.py checks both directions
against python-qpid-proton's own codec.

No I/O; no proton import (the pure core's rule, tests/unit/test_layering.py).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, TypeAlias

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
"""Protocol header a client sends (and the server answers) to start SASL (spec 5.3.1)."""
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
"""Protocol header of plain AMQP (no SASL layer)."""

SASL_FRAME_TYPE = 1

MECHANISMS, INIT, CHALLENGE, RESPONSE, OUTCOME = 0x40, 0x41, 0x42, 0x43, 0x44
NAMES = {
    MECHANISMS: "amqp:sasl-mechanisms:list",
    INIT: "amqp:sasl-init:list",
    CHALLENGE: "amqp:sasl-challenge:list",
    RESPONSE: "amqp:sasl-response:list",
    OUTCOME: "amqp:sasl-outcome:list",
}
_CODES = {name: code for code, name in NAMES.items()}

# sasl-code (spec 5.3.3.6)
OK, AUTH, SYS, SYS_PERM, SYS_TEMP = 0, 1, 2, 3, 4

DEFAULT_MAX_FRAME = 65536


class FrameError(ValueError):
    """Bytes that are not a well-formed SASL frame: the connection is closed."""


class Symbol(str):
    """An AMQP symbol (encoded as sym32, not str32)."""


Encodable: TypeAlias = None | bool | int | bytes | str | list[str]
"""A field value :func:`encode` writes (a list: an array of symbols; an int: the outcome code)."""
FieldValue: TypeAlias = "None | bool | int | bytes | str | list[FieldValue]"
"""A field value as the peer sent it (:func:`decode`): any of the types SASL frames use."""


@dataclasses.dataclass(frozen=True, slots=True)
class Frame:
    """A decoded SASL frame: ``code`` is MECHANISMS..OUTCOME (0 for an empty frame), ``fields``
    the list body as the peer sent it (it may omit trailing fields)."""

    code: int
    fields: tuple[FieldValue, ...]

    # sasl_rules hands field 1 (initial-response) to a ``bytes | None`` parameter without a check;
    # typed as FieldValue, that call needs an isinstance test there (a behaviour change, not made here).
    # Any: what the peer sent, read unchecked by sasl_rules (see above)
    def field(self, i: int) -> Any:
        """Field ``i``, None when the peer left it out."""
        return self.fields[i] if i < len(self.fields) else None


# --------------------------------------------------------------------------- encoding


def _encode_value(value: Encodable) -> bytes:
    if value is None:
        return b"\x40"
    if isinstance(value, bool):
        return b"\x41" if value else b"\x42"
    if isinstance(value, Symbol):
        raw = value.encode("ascii")
        return b"\xb3" + struct.pack(">I", len(raw)) + raw
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return b"\xb1" + struct.pack(">I", len(raw)) + raw
    if isinstance(value, bytes):
        return b"\xb0" + struct.pack(">I", len(value)) + value
    if isinstance(value, int):  # the only integer we send is the outcome code (ubyte)
        return b"\x50" + struct.pack(">B", value)
    if isinstance(value, list):  # array32 of sym32
        items = b"".join(struct.pack(">I", len(s)) + s.encode("ascii") for s in value)
        size = 4 + 1 + len(items)  # count + element constructor + elements
        return b"\xf0" + struct.pack(">II", size, len(value)) + b"\xb3" + items
    raise TypeError(f"cannot encode {type(value).__name__} in a SASL frame")


def encode(code: int, fields: list[Encodable]) -> bytes:
    """One complete SASL frame (frame header + body); trailing None fields are left out."""
    fields = list(fields)
    while fields and fields[-1] is None:
        fields.pop()
    items = b"".join(_encode_value(f) for f in fields)
    body = b"\x00\x53" + struct.pack(">B", code) + b"\xd0" + struct.pack(">II", 4 + len(items), len(fields)) + items
    return struct.pack(">IBBH", 8 + len(body), 2, SASL_FRAME_TYPE, 0) + body


def mechanisms(names: list[str]) -> bytes:
    """sasl-mechanisms offering ``names`` (an array of symbols)."""
    return encode(MECHANISMS, [[str(n) for n in names]])


def init(mechanism: str, initial_response: bytes | None = None, hostname: str | None = None) -> bytes:
    """sasl-init (a client's frame; the server side only needs it in tests)."""
    return encode(INIT, [Symbol(mechanism), initial_response, hostname])


def challenge(data: bytes) -> bytes:
    """sasl-challenge carrying ``data``."""
    return encode(CHALLENGE, [data])


def response(data: bytes) -> bytes:
    """sasl-response (a client's frame; tests)."""
    return encode(RESPONSE, [data])


def outcome(code: int, additional_data: bytes | None = None) -> bytes:
    """sasl-outcome with ``code`` (OK, AUTH, ...) and optional additional-data (SCRAM's server-final)."""
    return encode(OUTCOME, [code, additional_data])


# --------------------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise FrameError("undecodable SASL frame body: truncated")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])


_FIXED = {0x50: ">B", 0x60: ">H", 0x70: ">I", 0x80: ">Q", 0x51: ">b", 0x61: ">h", 0x71: ">i", 0x81: ">q"}


def _decode_element(r: _Reader, code: int) -> FieldValue:
    """A value whose constructor ``code`` has been read."""
    if code == 0x40:
        return None
    if code in (0x41, 0x42):
        return code == 0x41
    if code == 0x56:
        return r.u8() != 0
    if code == 0x43:  # uint0
        return 0
    if code == 0x44:  # ulong0
        return 0
    if code in (0x52, 0x53):  # smalluint, smallulong
        return r.u8()
    if code in _FIXED:
        fmt = _FIXED[code]
        return int(struct.unpack(fmt, r.take(struct.calcsize(fmt)))[0])
    if code in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3):
        n = r.u8() if code < 0xB0 else r.u32()
        raw = r.take(n)
        kind = code & 0x0F
        try:
            if kind == 0x0:
                return raw
            if kind == 0x1:
                return raw.decode("utf-8")
            return Symbol(raw.decode("ascii"))
        except UnicodeDecodeError:
            raise FrameError("undecodable SASL frame body: bad string") from None
    if code in (0xE0, 0xF0):
        size = r.u8() if code == 0xE0 else r.u32()
        inner = _Reader(r.take(size))
        count = inner.u8() if code == 0xE0 else inner.u32()
        element = inner.u8()
        if element not in (0xA3, 0xB3):
            raise FrameError(f"undecodable SASL frame body: array of 0x{element:02x}, not of symbols")
        return [_decode_element(inner, element) for _ in range(count)]
    if code == 0x45:
        return []
    raise FrameError(f"undecodable SASL frame body: type 0x{code:02x} is not used by SASL")


def _decode_list(r: _Reader) -> list[FieldValue]:
    code = r.u8()
    if code == 0x45:
        return []
    if code not in (0xC0, 0xD0):
        raise FrameError("SASL frame body is not one described list")
    size = r.u8() if code == 0xC0 else r.u32()
    inner = _Reader(r.take(size))
    count = inner.u8() if code == 0xC0 else inner.u32()
    values = [_decode_element(inner, inner.u8()) for _ in range(count)]
    if inner.pos != len(inner.buf):
        raise FrameError("undecodable SASL frame body: list size does not match its elements")
    return values


def decode(buf: bytes | bytearray | memoryview, max_frame: int = DEFAULT_MAX_FRAME) -> tuple[Frame | None, int]:
    """The first frame in ``buf`` and how many bytes it took; ``(None, 0)`` when ``buf`` holds
    only part of one (read more). An empty frame (size 8) comes back with code 0.

    Raises:
        FrameError: not a SASL frame, bigger than ``max_frame``, or a body that is not one
            described list with a SASL performative's descriptor.
    """
    if len(buf) < 8:
        return None, 0
    size, doff, ftype, _channel = struct.unpack_from(">IBBH", buf)
    if ftype != SASL_FRAME_TYPE:
        raise FrameError(f"frame type {ftype} is not SASL")
    if doff < 2 or size < doff * 4:
        raise FrameError(f"bad frame header size={size} doff={doff}")
    if size > max_frame:
        raise FrameError(f"SASL frame of {size} bytes exceeds {max_frame}")
    if len(buf) < size:
        return None, 0
    body = bytes(buf[doff * 4 : size])
    if not body:
        return Frame(0, ()), size
    r = _Reader(body)
    if r.u8() != 0x00:
        raise FrameError("SASL frame body is not one described list")
    descriptor = _decode_element(r, r.u8())
    if isinstance(descriptor, str):
        code = _CODES.get(descriptor, -1)
    else:
        code = descriptor if isinstance(descriptor, int) and not isinstance(descriptor, bool) else -1
    if code not in NAMES:
        raise FrameError(f"unknown SASL performative {descriptor!r}")
    fields = _decode_list(r)
    if r.pos != len(body):
        raise FrameError("SASL frame body is not one described list")
    return Frame(int(code), tuple(fields)), size


def mechanism_list(frame: Frame) -> list[str]:
    """sasl-server-mechanisms of a MECHANISMS frame (one symbol or an array of them)."""
    value = frame.field(0)
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]
