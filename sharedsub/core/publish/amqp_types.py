"""The AMQP 1.0 type constructors, as tables the message decoder looks codes up in; pure.

A constructor code (AMQP 1.0 §1.6) tells how many bytes its value takes (``FIXED``, or a size
field: ``VARIABLE``, ``COMPOUND``), which codes proton refuses where (``NOT_DESCRIPTORS``,
``UNHASHABLE_KEYS``) and what proton 0.40 makes of it: its pn_type_t number (``PN_TYPE``), its
Python class (``CLASS_NAMES``) and the type name property_value gives it (``INT_NAMES``).
Only constants: every table is read on the decoder's hot path, by the modules that import it
(amqp_walk, amqp_sections, proton_values, application_properties, header_properties).
"""

from __future__ import annotations

import struct

INT64 = (-(2**63), 2**63 - 1)
FIXED: dict[int, int] = {  # fixed-width primitive constructors -> bytes after the code
    0x40: 0, 0x41: 0, 0x42: 0, 0x43: 0, 0x44: 0, 0x45: 0,
    0x50: 1, 0x51: 1, 0x52: 1, 0x53: 1, 0x54: 1, 0x55: 1, 0x56: 1,
    0x60: 2, 0x61: 2,
    0x70: 4, 0x71: 4, 0x72: 4, 0x73: 4, 0x74: 4,
    0x80: 8, 0x81: 8, 0x82: 8, 0x83: 8, 0x84: 8,
    0x94: 16, 0x98: 16,
}
VARIABLE = frozenset((0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3))
COMPOUND = frozenset((0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0))
NOT_DESCRIPTORS = frozenset((0x00, 0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0))  # proton refuses these
UNHASHABLE_KEYS = frozenset((0x00, 0x45, 0xA0, 0xB0, 0xC0, 0xD0, 0xC1, 0xD1, 0xE0, 0xF0))
# proton's pn_type_t numbers (Array's repr shows them) of each constructor
PN_TYPE: dict[int, int] = {
    0x40: 1, 0x41: 2, 0x42: 2, 0x56: 2, 0x50: 3, 0x51: 4, 0x60: 5, 0x61: 6, 0x70: 7, 0x52: 7, 0x43: 7,
    0x71: 8, 0x54: 8, 0x73: 9, 0x80: 10, 0x53: 10, 0x44: 10, 0x81: 11, 0x55: 11, 0x83: 12, 0x72: 13,
    0x82: 14, 0x74: 15, 0x84: 16, 0x94: 17, 0x98: 18, 0xA0: 19, 0xB0: 19, 0xA1: 20, 0xB1: 20,
    0xA3: 21, 0xB3: 21, 0xE0: 23, 0xF0: 23, 0x45: 24, 0xC0: 24, 0xD0: 24, 0xC1: 25, 0xD1: 25,
}
INT_NAMES: dict[int, str] = {  # property_value type names (proton class -> AMQP type name)
    0x50: "ubyte", 0x51: "byte", 0x60: "ushort", 0x61: "short", 0x70: "uint", 0x52: "uint", 0x43: "uint",
    0x71: "int", 0x54: "int", 0x80: "ulong", 0x53: "ulong", 0x44: "ulong", 0x81: "long", 0x55: "long",
    0x83: "timestamp", 0x74: "long", 0x84: "long",  # decimal32/64 are int subclasses proton does not list
}
CLASS_NAMES: dict[int, str] = {  # proton's Python class of each constructor (its repr prefix)
    0x50: "ubyte", 0x51: "byte", 0x60: "ushort", 0x61: "short", 0x70: "uint", 0x52: "uint", 0x43: "uint",
    0x71: "int32", 0x54: "int32", 0x80: "ulong", 0x53: "ulong", 0x44: "ulong", 0x83: "timestamp",
    0x74: "decimal32", 0x84: "decimal64",
}
SIGNED = frozenset((0x51, 0x54, 0x55, 0x61, 0x71, 0x81, 0x83))
FLOAT = struct.Struct(">f")
DOUBLE = struct.Struct(">d")
