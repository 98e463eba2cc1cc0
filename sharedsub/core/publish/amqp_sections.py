"""The sections of an AMQP 1.0 message (AMQP 1.0 §3.2) and how a section is recognized; pure.

A message is a sequence of described values, each a section: header, delivery-annotations,
message-annotations, properties, application-properties, a body (data, amqp-sequence or
amqp-value) and footer, codes 0x70-0x78 (:data:`SECTION_NAMES`). :func:`section_descriptor`
tells which section a descriptor makes as the previous path did (``check_encoding`` compared the
descriptor as a Python value with the codes and names; proton's message decoder dispatches only
ulong-encoded codes). :func:`described_value_is_described` spots the value proton's Data tree
loses track after (sharedsub.core.publish.amqp_message). Faults raise MessageDecodeError.
"""

from __future__ import annotations

from sharedsub.core.errors import MessageDecodeError
from sharedsub.core.publish.amqp_types import DOUBLE, FLOAT, INT_NAMES, SIGNED
from sharedsub.core.publish.amqp_walk import ValueWalk, check_text, malformed, underflow

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
SECTION_NAMES: dict[int, str] = {
    HEADER: "amqp:header:list",
    DELIVERY_ANNOTATIONS: "amqp:delivery-annotations:map",
    MESSAGE_ANNOTATIONS: "amqp:message-annotations:map",
    PROPERTIES: "amqp:properties:list",
    APPLICATION_PROPERTIES: "amqp:application-properties:map",
    DATA: "amqp:data:binary",
    AMQP_SEQUENCE: "amqp:amqp-sequence:list",
    AMQP_VALUE: "amqp:amqp-value:*",
    FOOTER: "amqp:footer:map",
}
_SECTION_TEXTS = frozenset(SECTION_NAMES.values())
BODY = (DATA, AMQP_SEQUENCE, AMQP_VALUE)

# A section's offset and the (constructor, start, stop) of its list's or map's elements (None
# when its value is not a list or map).
SectionFields = tuple[int, list[tuple[int, int, int]] | None]


def section_descriptor(walk: ValueWalk, pos: int) -> tuple[int | None, int]:
    """(section kind when proton's message decoder dispatches it, offset after the descriptor).

    check_encoding compared the descriptor as a Python value with the section codes and names,
    so any integer or float type equal to a code and a string or symbol equal to a name makes a
    section; proton's message decoder dispatches only ulong-encoded codes.

    Raises:
        MessageDecodeError: the descriptor is not a whole value, or names no section.
    """
    raw = walk.raw
    if pos >= walk.end:
        raise underflow(pos)
    code = raw[pos]
    after = walk.descriptor(pos, 0, False)
    value: int | float | str | None = None
    if code in INT_NAMES:
        value = int.from_bytes(raw[pos + 1 : after], signed=code in SIGNED)
    elif code == 0x72:
        value = FLOAT.unpack(raw[pos + 1 : after])[0]
    elif code == 0x82:
        value = DOUBLE.unpack(raw[pos + 1 : after])[0]
    elif code in (0xA1, 0xB1, 0xA3, 0xB3):
        start = pos + (2 if code < 0xB0 else 5)
        check_text(raw, code, start, after)
        value = raw[start:after].decode("utf-8")
        if value in _SECTION_TEXTS:
            return None, after
    if isinstance(value, (int, float)) and HEADER <= value <= FOOTER and value == int(value):
        return (int(value) if code in (0x53, 0x80) else None), after
    raise malformed(pos, f"a value that is not a message section (descriptor {value!r})" if value is not None
                    else f"a value that is not a message section (descriptor of constructor 0x{code:02x})")


def described_value_is_described(raw: bytes, pos: int) -> bool:
    """True when the described value whose descriptor starts at ``pos`` has a described value."""
    try:
        after = ValueWalk(raw).descriptor(pos, 0, False)
    except MessageDecodeError:
        return False  # the real walk raises for it
    return after < len(raw) and raw[after] == 0x00

