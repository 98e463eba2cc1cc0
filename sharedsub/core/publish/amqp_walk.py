"""One pass over an AMQP message's values with proton's acceptance, and its limits; pure.

:class:`ValueWalk` checks that bytes are complete values as proton's ``pn_data_decode`` reads
them (constructors of sharedsub.core.publish.amqp_types, sizes, counts) and, when asked, that
they hold nothing proton's ``Data.get_object`` would refuse (:func:`check_text`: a string that is
not UTF-8, a symbol that is not ASCII, a char above U+10FFFF, an unhashable map key). It builds no
values; it returns offsets and, for the decoder's sections, the extents of a list's or map's
elements. Limits: at most :data:`MAX_NODES` values in a section (proton's node limit) and
:data:`MAX_DEPTH` levels of nesting (a divergence: proton's Python layer fails at its recursion
limit instead; sharedsub.core.publish.amqp_message).

Every fault is a MessageDecodeError naming its offset (:func:`malformed`, :func:`underflow`), the
one error of the decoder's modules for bytes that are not a message. This is the decoder's hot
path (about 7 us a message): its loops keep their inlined fast cases.
"""

from __future__ import annotations

from sharedsub.core.errors import MessageDecodeError
from sharedsub.core.publish.amqp_types import COMPOUND, FIXED, NOT_DESCRIPTORS, PN_TYPE, UNHASHABLE_KEYS, VARIABLE

MAX_NODES = 65535  # proton's pn_data_t holds at most this many nodes (uint16 node ids)
MAX_DEPTH = 100


def malformed(pos: int, why: str) -> MessageDecodeError:
    """The error for a transfer that is not a valid AMQP message, because of ``why`` at ``pos``."""
    return MessageDecodeError(f"transfer is not a valid AMQP message: {why} (offset {pos})")


def underflow(pos: int) -> MessageDecodeError:
    """The error for a value at ``pos`` that runs past the end of the transfer."""
    return malformed(pos, "a value runs past the end of the transfer")


class ValueWalk:
    """One pass over a message's values with proton's pn_data_decode acceptance.

    ``value`` returns the offset after the value at ``pos``; with ``semantic`` it also checks
    what proton's ``Data.get_object`` would refuse (strings, symbols, chars, map keys). Both
    kinds of fault raise MessageDecodeError. ``nodes`` counts proton's Data nodes of the
    section being walked; ``nested`` records a described value whose value is described.
    """

    __slots__ = ("end", "nested", "nodes", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.end = len(raw)
        self.nodes = 0
        self.nested = False

    def value(self, pos: int, depth: int, semantic: bool) -> int:
        """Offset after the value (described or not) at ``pos``, ``depth`` levels down."""
        raw = self.raw
        if pos >= self.end:
            raise underflow(pos)
        code = raw[pos]
        if code != 0x00:
            return self.primitive(code, pos + 1, depth, semantic)
        if depth >= MAX_DEPTH:
            raise malformed(pos, f"values nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1  # the described node
        pos = self.descriptor(pos + 1, depth, semantic)
        if pos < self.end and raw[pos] == 0x00:
            self.nested = True
        return self.value(pos, depth + 1, semantic)

    def descriptor(self, pos: int, depth: int, semantic: bool) -> int:
        """Offset after the descriptor at ``pos`` (a constructor proton takes for one)."""
        if pos >= self.end:
            raise underflow(pos)
        code = self.raw[pos]
        if code in NOT_DESCRIPTORS:
            raise malformed(pos, f"constructor 0x{code:02x} cannot be a descriptor")
        return self.primitive(code, pos + 1, depth, semantic)

    def primitive(self, code: int, pos: int, depth: int, semantic: bool) -> int:
        """Offset after the value whose constructor ``code`` was at ``pos - 1``."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise malformed(pos, f"more than {MAX_NODES} values in one section")
        end = self.end
        width = FIXED.get(code)
        if width is not None:
            if end - pos < width:
                raise underflow(pos)
            if semantic and code == 0x73 and int.from_bytes(self.raw[pos : pos + 4]) > 0x10FFFF:
                raise malformed(pos, "a char above U+10FFFF")
            return pos + width
        if code in VARIABLE:
            if code < 0xB0:
                if pos >= end:
                    raise underflow(pos)
                size = self.raw[pos]
                pos += 1
            else:
                if end - pos < 4:
                    raise underflow(pos)
                size = int.from_bytes(self.raw[pos : pos + 4])
                pos += 4
            if end - pos < size:
                raise underflow(pos)
            if semantic and code & 0x0F:
                check_text(self.raw, code, pos, pos + size)
            return pos + size
        if code in COMPOUND:
            return self.compound(code, pos, depth, semantic)
        raise malformed(pos - 1, f"unknown constructor 0x{code:02x}")

    def compound(  # noqa: C901 (one pass over a compound's wire forms: the decoder's hot path, ~7 us a message)
        self, code: int, pos: int, depth: int, semantic: bool, collect: list[tuple[int, int, int]] | None = None
    ) -> int:
        """Offset after the list, map or array whose constructor ``code`` was at ``pos - 1``;
        ``collect`` receives (constructor, start, stop) of each element of a list or map."""
        raw, end = self.raw, self.end
        if depth >= MAX_DEPTH:
            raise malformed(pos, f"values nested deeper than {MAX_DEPTH} levels")
        array = code in (0xE0, 0xF0)
        if code in (0xC0, 0xC1, 0xE0):  # size and count of one byte
            minimum = 2 if array else 1
            if end - pos < minimum + 1:
                raise underflow(pos)
            size = raw[pos]
            pos += 1
            if size < minimum:
                raise malformed(pos, f"a size of {size} leaves no room for the count")
            if end - pos < size:
                raise underflow(pos)
            count = raw[pos]
            stop = pos + size
            pos += 1
        else:
            minimum = 5 if array else 4
            if end - pos < minimum + 4:
                raise underflow(pos)
            size = int.from_bytes(raw[pos : pos + 4])
            pos += 4
            if size < minimum:
                raise malformed(pos, f"a size of {size} leaves no room for the count")
            if end - pos < size:
                raise underflow(pos)
            count = int.from_bytes(raw[pos : pos + 4])
            stop = pos + size
            pos += 4
        if array:
            pos = self.array(pos, count, depth, semantic)
        else:
            if count > end - pos:
                raise underflow(pos)
            check_keys = semantic and code in (0xC1, 0xD1)
            fixed, nodes, unhashable = FIXED, self.nodes, UNHASHABLE_KEYS
            append = collect.append if collect is not None else None
            for i in range(count):
                start = pos
                if pos >= end:
                    raise underflow(pos)
                element = raw[pos]
                if check_keys and not i & 1 and element in unhashable:
                    raise malformed(pos, "a map key that is a binary, list, map, array or described value")
                width = fixed.get(element)
                if width is not None and element != 0x73:  # inline: fixed-width scalars
                    pos += 1 + width
                    if pos > end:
                        raise underflow(start + 1)
                    nodes += 1
                elif element == 0xA1 or element == 0xA3 or element == 0xA0:  # inline: short text
                    if start + 2 > end:
                        raise underflow(start + 1)
                    pos = start + 2 + raw[start + 1]
                    if pos > end:
                        raise underflow(start + 2)
                    if semantic and element != 0xA0:
                        try:
                            raw[start + 2 : pos].decode("utf-8" if element == 0xA1 else "ascii")
                        except UnicodeDecodeError:
                            check_text(raw, element, start + 2, pos)
                    nodes += 1
                else:
                    self.nodes = nodes
                    pos = self.value(pos, depth + 1, semantic)
                    nodes = self.nodes
                if append is not None:
                    append((element, start, pos))
            self.nodes = nodes
            if nodes > MAX_NODES:
                raise malformed(pos, f"more than {MAX_NODES} values in one section")
        if pos != stop:
            kind = "list" if code in (0xC0, 0xD0) else "map" if code in (0xC1, 0xD1) else "array"
            raise malformed(pos, f"the size of a {kind} disagrees with its elements")
        return pos

    def array(self, pos: int, count: int, depth: int, semantic: bool) -> int:
        """Offset after the ``count`` elements of an array whose element constructor is at ``pos``."""
        raw, end = self.raw, self.end
        if pos >= end:
            raise underflow(pos)
        code = raw[pos]
        pos += 1
        while code == 0x00:  # described element constructor (each descriptor one node)
            pos = self.descriptor(pos, depth + 1, semantic)
            if pos >= end:
                raise underflow(pos)
            code = raw[pos]
            pos += 1
        if code not in PN_TYPE:
            raise malformed(pos - 1, f"unknown array element constructor 0x{code:02x}")
        width = FIXED.get(code)
        if width is not None and not (semantic and code == 0x73):
            if self.nodes + count > MAX_NODES:
                raise malformed(pos, f"more than {MAX_NODES} values in one section")
            if end - pos < width * count:
                raise underflow(pos)
            self.nodes += count
            return pos + width * count
        if count > end - pos:
            raise underflow(pos)
        for _ in range(count):
            pos = self.primitive(code, pos, depth + 1, semantic)
        return pos


def check_text(raw: bytes, code: int, start: int, stop: int) -> None:
    """str8/32 must be UTF-8, sym8/32 ASCII (what proton's Python binding decodes them with).

    Raises:
        MessageDecodeError: ``raw[start:stop]`` does not decode so.
    """
    try:
        raw[start:stop].decode("utf-8" if code & 0x0F == 1 else "ascii")
    except UnicodeDecodeError as exc:
        kind = "string" if code & 0x0F == 1 else "symbol"
        raise malformed(start, f"a {kind} that is not {'UTF-8' if kind == 'string' else 'ASCII'} ({exc.reason})") from None

