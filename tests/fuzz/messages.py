"""Hypothesis strategies for AMQP messages and their mutations, and the publish path as a pure
function: the product's decoder and topic-row functions, called as ``connectors/amqp/handler.py``
``_on_published`` and the committer call them, never a copy of them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

import proton
import pyarrow as pa
from hypothesis import strategies as st
from proton import Described, symbol, ulong

from sharedsub.core import addressing
from sharedsub.core.errors import SharedSubError
from sharedsub.core.publish import amqp_message
from sharedsub.core.publish.topic_row import TopicColumns, topic_columns
from sharedsub.storage.commits.py_columns import as_table
from sharedsub.storage.topic_rows import topic_batch

HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, SEQUENCE, VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
SECTION_CODES = [HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES, APPLICATION_PROPERTIES,
                 DATA, SEQUENCE, VALUE, FOOTER]

INT64 = (-(2**63), 2**63 - 1)

# Text proton can encode (no lone surrogates); invalid UTF-8 comes from the byte mutations.
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
ascii_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)

scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 255).map(proton.ubyte),
    st.integers(-128, 127).map(proton.byte),
    st.integers(0, 2**16 - 1).map(proton.ushort),
    st.integers(-(2**15), 2**15 - 1).map(proton.short),
    st.integers(0, 2**32 - 1).map(proton.uint),
    st.integers(-(2**31), 2**31 - 1).map(proton.int32),
    st.integers(*INT64),
    st.integers(0, 2**64 - 1).map(ulong),
    st.floats(width=32).map(proton.float32),
    st.floats(),
    st.integers(*INT64).map(proton.timestamp),
    st.characters(blacklist_categories=("Cs",)).map(proton.char),
    st.uuids(),
    st.binary(max_size=20),
    text,
    ascii_text.map(symbol),
)
hashable = scalars.filter(lambda v: not (isinstance(v, float) and v != v))  # NaN keys never compare equal

values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(hashable, inner, max_size=4),
        st.builds(lambda code, v: Described(ulong(code), v), st.integers(0, 2**64 - 1), inner),
        st.builds(lambda sym, v: Described(symbol(sym), v), ascii_text, inner),
    ),
    max_leaves=12,
)

# Application-property values: the simple types JMS allows, and everything else AMQP can carry.
property_values = st.one_of(scalars, values)
property_maps = st.dictionaries(st.one_of(text, hashable), property_values, max_size=8)

timestamps = st.integers(*INT64).map(proton.timestamp)
message_ids = st.one_of(st.none(), st.integers(0, 2**64 - 1).map(ulong), st.uuids(), st.binary(max_size=16), text)


@st.composite
def header(draw: st.DrawFn, wrong: bool) -> list[Any]:
    if wrong:
        return draw(st.lists(values, max_size=7))
    fields = [
        draw(st.one_of(st.none(), st.booleans())),
        draw(st.one_of(st.none(), st.integers(0, 255).map(proton.ubyte))),
        draw(st.one_of(st.none(), st.integers(0, 2**32 - 1).map(proton.uint))),
        draw(st.one_of(st.none(), st.booleans())),
        draw(st.one_of(st.none(), st.integers(0, 2**32 - 1).map(proton.uint))),
    ]
    return fields[: draw(st.integers(0, 5))]


@st.composite
def properties(draw: st.DrawFn, wrong: bool) -> list[Any]:
    if wrong:
        return draw(st.lists(values, max_size=14))
    optional = lambda s: st.one_of(st.none(), s)  # noqa: E731
    fields = [
        draw(message_ids),
        draw(optional(st.binary(max_size=16))),
        draw(optional(text)),
        draw(optional(text)),
        draw(optional(text)),
        draw(message_ids),
        draw(optional(ascii_text.map(symbol))),
        draw(optional(ascii_text.map(symbol))),
        draw(optional(timestamps)),
        draw(optional(timestamps)),
        draw(optional(text)),
        draw(optional(st.integers(0, 2**32 - 1).map(proton.uint))),
        draw(optional(text)),
    ]
    return fields[: draw(st.integers(0, 13))]


@st.composite
def sections(draw: st.DrawFn) -> list[tuple[int, Any]]:
    """Sections of a message in the standard order; now and then a section carries a value of
    the wrong type (a header that is a map, properties that are a string, ...)."""
    out: list[tuple[int, Any]] = []

    def wrong() -> bool:
        return draw(st.integers(0, 9)) == 0

    if draw(st.booleans()):
        out.append((HEADER, draw(values) if wrong() else draw(header(wrong()))))
    for code in (DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS):
        if draw(st.integers(0, 3)) == 0:
            out.append((code, draw(values) if wrong() else draw(st.dictionaries(ascii_text.map(symbol), values, max_size=4))))
    if draw(st.booleans()):
        out.append((PROPERTIES, draw(values) if wrong() else draw(properties(wrong()))))
    if draw(st.booleans()):
        out.append((APPLICATION_PROPERTIES, draw(values) if wrong() else draw(property_maps)))
    body = draw(st.sampled_from(["none", "data", "sequence", "value"]))
    if body == "data":
        out.extend((DATA, draw(st.binary(max_size=32))) for _ in range(draw(st.integers(1, 2))))
    elif body == "sequence":
        out.append((SEQUENCE, draw(st.lists(values, max_size=4))))
    elif body == "value":
        out.append((VALUE, draw(values)))
    if draw(st.integers(0, 4)) == 0:
        out.append((FOOTER, draw(values) if wrong() else draw(st.dictionaries(ascii_text.map(symbol), values, max_size=3))))
    return out


def encode_section(code: Any, value: Any) -> bytes:
    data = proton.Data()
    data.put_object(Described(code if isinstance(code, symbol) else ulong(code), value))
    return data.encode()


def encode(secs: list[tuple[Any, Any]]) -> bytes:
    return b"".join(encode_section(code, value) for code, value in secs)


# ------------------------------------------------------------------ byte-level mutations


@st.composite
def mutated(draw: st.DrawFn, parts: list[bytes]) -> bytes:
    """``parts`` (encoded sections) joined after a few random mutations: sections dropped,
    repeated or reordered, then bit flips, byte overwrites, truncations, insertions, deletions."""
    parts = list(parts)
    if parts and draw(st.booleans()):
        parts = draw(st.permutations(parts))
    if parts and draw(st.integers(0, 3)) == 0:
        parts.insert(draw(st.integers(0, len(parts))), draw(st.sampled_from(parts)))
    if parts and draw(st.integers(0, 3)) == 0:
        parts.pop(draw(st.integers(0, len(parts) - 1)))
    raw = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "duplicate"]))
        n = len(raw)
        if op == "flip" and n:
            i = draw(st.integers(0, n - 1))
            raw[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and n:
            interesting = st.sampled_from([0x00, 0x40, 0x45, 0x53, 0x7F, 0x80, 0xA1, 0xB1, 0xC0, 0xD0, 0xE0, 0xF0, 0xFF])
            raw[draw(st.integers(0, n - 1))] = draw(interesting | st.integers(0, 255))
        elif op == "truncate":
            del raw[draw(st.integers(0, n)) :]
        elif op == "insert":
            i = draw(st.integers(0, n))
            raw[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and n:
            i = draw(st.integers(0, n - 1))
            del raw[i : i + draw(st.integers(1, 8))]
        elif op == "duplicate" and n:
            i = draw(st.integers(0, n - 1))
            raw[i:i] = raw[i : i + draw(st.integers(1, 16))]
    return bytes(raw)


# ------------------------------------------------------------------ the publish path


class Refused(Exception):
    """The transfer would be rejected with ``condition`` (what the handler answers)."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(f"{condition}: {description}")
        self.condition = condition


@dataclasses.dataclass(frozen=True)
class Ingested:
    """A transfer the front end would store: its topic row but the commit's columns, and its bytes
    (what sharedsub.storage.topic_rows.topic_batch takes)."""

    columns: TopicColumns
    message: bytes


def ingest(raw: bytes, address: str | None = "fuzz-topic", *, publisher: str = "fuzz-publisher") -> Ingested:
    """What ``_on_published`` would queue for ``raw`` on a link to ``address`` (an anonymous-relay
    link when None): the product's decoder and topic-row builder, as the handler calls them.

    Raises:
        Refused: the handler would reject the transfer (a SharedSubError from
            sharedsub.core.publish.amqp_message, the address or the routing key), as it does.
        anything else: a defect, the handler would end the connection (or the commit fails).
    """
    try:
        decoded = amqp_message.decode(raw)
        target = addressing.parse_address(address) if address is not None else addressing.parse_address(decoded.to)
        columns = topic_columns(decoded, target, publisher=publisher, size=len(raw))
    except SharedSubError as exc:
        raise Refused(str(exc.condition), exc.description) from None
    return Ingested(columns, raw)


def to_table(rows: list[Ingested]) -> pa.Table:
    """The rows as the committer's topic-table commit converts them (topic_batch, then Arrow)."""
    return as_table(topic_batch(0, dt.datetime.now(dt.UTC), rows))


def random_uuid() -> str:
    return uuid.uuid4().hex
