"""The application-properties section read into its column and the routing key's properties; pure.

:func:`application_properties` gives, for the last application-properties section of a message,
the ``application_properties`` column (one :class:`PropertyValue` per key, in first-key order)
and the properties whose key and value are strings (what ``addressing.routing_key`` may take the
key from), as the previous path made them of proton's ``Data.get_object`` (message_columns and
property_value, tests/proton_columns.py): keys compare as Python values (``1``, ``ulong(1)``
and ``True`` are one key; the first key's text and the last value stay). The usual values
(string, int, long, uint, boolean) are read straight from the walked extents; any other value
through sharedsub.core.publish.proton_values. A binary value is stored as type ``binary`` with
its bytes in hex (a divergence: sharedsub.core.publish.amqp_message).

Raises MessageDecodeError for text proton cannot decode and a binary, list, map, array or
described key; InvalidMessage for a section value that is not a map (and not empty, zero or
null).
"""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from sharedsub.core.errors import InvalidMessage
from sharedsub.core.publish.amqp_types import CLASS_NAMES, COMPOUND, INT64, INT_NAMES, UNHASHABLE_KEYS
from sharedsub.core.publish.amqp_walk import ValueWalk, malformed
from sharedsub.core.publish.proton_values import Array, Binary, Described, ValueReader, extent


class PropertyValue(TypedDict):
    """One application property's value as the ``application_properties`` column stores it (the
    PROPERTY_VALUE struct of sharedsub.storage.schemas.TOPIC, as property_value builds it)."""

    type: str
    long: int | None
    double: float | None
    string: str | None
    bool: bool | None


ApplicationProperties = tuple[list[tuple[str, PropertyValue]], dict[str, str]]
# (the application_properties column, the string-valued properties by string key)


def application_properties(raw: bytes, pos: int, fields: list[tuple[int, int, int]] | None) -> ApplicationProperties:
    """(the application_properties column, the string-valued properties by string key) of the
    section value at ``pos`` (``fields``: extents of its map's keys and values when the walk
    collected them), as proton's get_object, message_columns and property_value give them.

    Raises:
        MessageDecodeError: text proton cannot decode, an unhashable key.
        InvalidMessage: a value that is not a map (and not empty, zero or null).
    """
    reader = ValueReader(raw)
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
                struct_, string, _ = _property(reader, start)
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
    if isinstance(value, (Described, Array)):
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


def _property(reader: ValueReader, pos: int) -> tuple[PropertyValue, str | None, int]:
    """(PROPERTY_VALUE struct, the value when it is text, offset after it) of any value at ``pos``."""
    raw = reader.raw
    code = raw[pos]
    if code in (0xA1, 0xB1, 0xA3, 0xB3):
        start, stop = extent(raw, code, pos + 1)
        text = reader.text(code, start, stop)
        return _struct("string" if code & 0x0F == 1 else "symbol", string=text), text, stop
    if code == 0x00 or code in COMPOUND or code == 0x45:
        value, stop = reader.obj(pos, 0)
        kind = ("Described" if isinstance(value, Described) else "Array" if isinstance(value, Array)
                else "dict" if isinstance(value, dict) else "list")
        return _struct(kind, string=str(value)), None, stop
    value, stop = reader.scalar(code, pos + 1)
    return _property_struct(code, value), (value if code == 0x73 else None), stop


# Any: a scalar of :meth:`ValueReader.scalar`, whose class follows from ``code`` (see there)
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
    if isinstance(value, Binary):
        return _struct("binary", string=bytes(value).hex())
    if isinstance(value, uuid.UUID):
        return _struct("uuid", string=str(value))
    name = INT_NAMES[code]
    if name == "timestamp":
        return _struct(name, string=str(int(value)))
    if INT64[0] <= value <= INT64[1]:
        return _struct(name, long=int(value))
    return _struct(name, double=float(value))

