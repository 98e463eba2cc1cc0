"""Proton 0.40's readers of a list section's fields, mirrored for bytes already walked; pure.

Mirrors of proton 0.40's consumers (c/src/core/consumers.h), which its message decoder reads the
header and properties sections with: positional and type-strict. Each ``read_*`` takes the
offset of a field and the end of its list and returns (value, offset of the next field); a
field of another type reads as absent (the type's default) and is skipped, and on a failed read
the position jumps to the end of the enclosing list. They never raise on structure (the bytes
were walked by sharedsub.core.publish.amqp_walk first); :func:`read_id` raises
MessageDecodeError for a string id that is not UTF-8, as proton's binding does.
sharedsub.core.publish.header_properties reads the fields with these when its fast path
cannot.
"""

from __future__ import annotations

import uuid

from sharedsub.core.errors import MessageDecodeError


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


def list_fields(raw: bytes, pos: int, end: int) -> tuple[int, int]:
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


def read_bool(raw: bytes, pos: int, end: int) -> tuple[bool, int]:
    """A boolean field (false when absent or of another type)."""
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


def read_ubyte(raw: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """A ubyte field (None when absent or of another type)."""
    if pos + 1 > end:
        return None, end
    code = raw[pos]
    pos += 1
    if code == 0x50:
        return (raw[pos], pos + 1) if pos + 1 <= end else (None, end)
    return None, _skip(raw, code, pos, end)


def read_uint(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    """A uint field (0 when absent or of another type)."""
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


def read_timestamp(raw: bytes, pos: int, end: int) -> tuple[int, int]:
    """A timestamp field in ms (0 when absent or of another type, whose bytes are then not skipped)."""
    if pos + 1 > end:
        return 0, end
    code = raw[pos]
    pos += 1
    if code == 0x83:
        if pos + 8 > end:
            return 0, end
        return int.from_bytes(raw[pos : pos + 8], signed=True), pos + 8
    return 0, pos  # proton does not skip a value of another type here


def read_text(raw: bytes, pos: int, end: int, codes: tuple[int, int]) -> tuple[bytes | None, int]:
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


def read_binary(raw: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    """A binary field's bytes (None when absent or of another type)."""
    if pos + 1 > end:
        return None, end
    code = raw[pos]
    pos += 1
    if code == 0x40:
        return None, pos
    if code in (0xA0, 0xB0):
        return _read_sized(raw, pos, end, code == 0xB0)
    return None, _skip(raw, code, pos, end)


def read_id(raw: bytes, pos: int, end: int, name: str) -> tuple[str | None, int]:
    """A message-id/correlation-id as id_text renders it (None for absent or non-id types).

    Raises:
        MessageDecodeError: a string id that is not UTF-8 (``name`` says which field).
    """
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

