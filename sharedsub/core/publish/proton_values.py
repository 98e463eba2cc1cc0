"""AMQP values as proton's ``Data.get_object`` returns them, decoded from bytes already walked; pure.

The previous path stored what proton's Python binding made of a value: its ``str()`` for keys
and compound application properties, its equality and hashing for duplicate keys. The classes
here stand in for proton's (``ulong(3)``, ``symbol('a')``, ``Described(...)``, ``Array(...)``,
an unhashable binary) so that they compare, hash, print and repr alike, and
:class:`ValueReader` decodes a value into them. Only application properties that are not a
plain string, integer or boolean take this path (sharedsub.core.publish.application_properties);
the bytes were walked first (sharedsub.core.publish.amqp_walk), so the reader checks no
structure, only what ``get_object`` itself refuses (text, chars, unhashable map keys), raising
MessageDecodeError.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeAlias

from sharedsub.core.publish.amqp_types import CLASS_NAMES, COMPOUND, DOUBLE, FIXED, FLOAT, PN_TYPE, SIGNED
from sharedsub.core.publish.amqp_walk import check_text, malformed


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


class Binary(bytes):
    """A binary value: unhashable like proton's memoryview (rendered as bytes, not an address)."""

    __hash__ = None  # type: ignore[assignment]


ProtonObject: TypeAlias = (
    "None | bool | int | float | str | bytes | uuid.UUID | Described | Array"
    " | list[ProtonObject] | dict[ProtonObject, ProtonObject]"
)
"""A value as proton's ``Data.get_object`` returns it (the classes below stand in for proton's)."""


class Described:
    """A described value (proton's ``Described``): unhashable, equal by descriptor and value."""

    __slots__ = ("descriptor", "value")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, descriptor: ProtonObject, value: ProtonObject) -> None:
        self.descriptor, self.value = descriptor, value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Described) and (self.descriptor, self.value) == (other.descriptor, other.value)

    def __repr__(self) -> str:
        return f"Described({self.descriptor!r}, {self.value!r})"


class _Undescribed:
    def __repr__(self) -> str:
        return "UNDESCRIBED"


_UNDESCRIBED = _Undescribed()


class Array:
    """An array (proton's ``Array``): its descriptor or UNDESCRIBED, pn_type_t number and elements."""

    __slots__ = ("descriptor", "elements", "type")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, descriptor: ProtonObject | _Undescribed, type_: int, elements: list[ProtonObject]) -> None:
        self.descriptor, self.type, self.elements = descriptor, type_, elements

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Array) and (self.descriptor, self.type, self.elements) == (
            other.descriptor, other.type, other.elements)

    def __repr__(self) -> str:
        els = "".join(", " + repr(e) for e in self.elements)
        return f"Array({self.descriptor!r}, {self.type!r}{els})"


class ValueReader:
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

    def text(self, code: int, start: int, stop: int) -> str:
        """The str8/32 (UTF-8) or sym8/32 (ASCII) text at ``raw[start:stop]``."""
        try:
            return self.raw[start:stop].decode("utf-8" if code & 0x0F == 1 else "ascii")
        except UnicodeDecodeError:
            check_text(self.raw, code, start, stop)
            raise  # pragma: no cover (check_text raised)

    # The value's class follows from ``code`` (as in proton's decoder) and callers rely on that
    # (application_properties' property struct, a char's text); the decode path takes no isinstance checks to tell mypy.
    # Any: one of proton's decoded classes, picked by ``code``
    def scalar(self, code: int, pos: int) -> tuple[Any, int]:
        """A non-compound value whose constructor ``code`` was at ``pos - 1``."""
        raw = self.raw
        width = FIXED.get(code)
        if width is None:
            start, stop = extent(raw, code, pos)
            if code & 0x0F == 0:
                return Binary(raw[start:stop]), stop
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

    def obj(self, pos: int, depth: int) -> tuple[ProtonObject, int]:
        """Any value as proton's object."""
        raw = self.raw
        code = raw[pos]
        if code == 0x00:
            descriptor, pos = self.obj(pos + 1, depth + 1)
            value, pos = self.obj(pos, depth + 1)
            return Described(descriptor, value), pos
        return self.body(code, pos + 1, depth)

    def body(self, code: int, pos: int, depth: int) -> tuple[ProtonObject, int]:
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
        out: dict[ProtonObject, ProtonObject] = {}
        for i in range(0, len(items), 2):
            try:
                out[items[i]] = items[i + 1] if i + 1 < len(items) else None
            except TypeError:
                raise malformed(pos, "a map key that is a binary, list, map, array or described value") from None
        return out, pos

    def array(self, pos: int, count: int, depth: int) -> tuple[ProtonObject, int]:
        """The array of ``count`` elements whose element constructor is at ``pos``."""
        raw = self.raw
        code = raw[pos]
        pos += 1
        descriptors: list[ProtonObject] = []
        while code == 0x00:
            descriptor, pos = self.scalar(raw[pos], pos + 1)
            descriptors.append(descriptor)
            code = raw[pos]
            pos += 1
        elements = descriptors[1:]  # proton puts further descriptors among the elements
        for _ in range(count):
            element, pos = self.body(code, pos, depth + 1)
            elements.append(element)
        return Array(descriptors[0] if descriptors else _UNDESCRIBED, PN_TYPE[code], elements), pos


def extent(raw: bytes, code: int, pos: int) -> tuple[int, int]:
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

