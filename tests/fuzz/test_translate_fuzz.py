"""Property tests of the publish path's message reading (no server).

Whatever bytes a publisher sends, the decoder (sharedsub.core.publish.amqp_message) and the
topic-row builder (sharedsub.core.publish.topic_row, with the routing key) either refuse the
transfer (a SharedSubError: the handler answers rejected) or give a row that the committer's
conversion (sharedsub.storage.topic_rows, then Arrow with ``schemas.TOPIC``) takes: a row that
fails there would fail its whole group commit, the other publishers' messages with it.
"""

from __future__ import annotations

import math
from typing import Any

import proton
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import messages as m
from tests.fuzz.seed import SEED

FUZZ = settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _outcome(raw: bytes, address: str | None = "fuzz-topic") -> m.Ingested | None:
    """The row ``raw`` becomes (checked to convert alone), or None when it is refused."""
    try:
        row = m.ingest(raw, address)
    except m.Refused as exc:
        assert exc.condition in ("amqp:decode-error", "amqp:invalid-field"), exc  # noqa: PT017 (a refusal is one of two outcomes)
        return None
    m.to_table([row])
    return row


@seed(SEED)
@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_are_refused_or_stored(raw: bytes) -> None:
    _outcome(raw)


@seed(SEED)
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(m.SECTION_CODES), m.values), max_size=5))
def test_sections_of_any_value_are_refused_or_stored(secs: list[tuple[int, Any]]) -> None:
    """Message sections holding values of any type, in any order, repeated or not."""
    _outcome(m.encode(secs))
    _outcome(m.encode(secs), None)


@seed(SEED)
@FUZZ
@given(st.data())
def test_mutated_messages_are_refused_or_stored(data: st.DataObject) -> None:
    parts = [m.encode_section(code, value) for code, value in data.draw(m.sections())]
    raw = data.draw(m.mutated(parts))
    _outcome(raw)


@seed(SEED)
@FUZZ
@given(st.lists(m.sections(), min_size=1, max_size=6))
def test_a_group_of_messages_converts_together(messages: list[list[tuple[int, Any]]]) -> None:
    """The committer converts one group of publishes (any publishers) as one table."""
    rows = [row for row in (_outcome(m.encode(secs)) for secs in messages) if row is not None]
    table = m.to_table(rows)
    assert table.num_rows == len(rows)


@seed(SEED)
@settings(FUZZ, max_examples=8)
@given(st.integers(200, 3000), m.scalars)
def test_a_huge_application_properties_map_is_stored(n: int, value: Any) -> None:
    props = {f"p{i}": value for i in range(n)} | {proton.symbol("sym"): value, proton.ulong(2**64 - 1): value}
    row = _outcome(m.encode([(m.APPLICATION_PROPERTIES, props), (m.VALUE, "x")]))
    assert row is not None
    assert len(row.columns["application_properties"]) == n + 2


@seed(SEED)
@FUZZ
@given(
    st.integers(0, 2**64 - 1),
    st.integers(*m.INT64),
    st.integers(*m.INT64),
)
def test_numbers_at_the_edges_of_their_types_are_stored(big: int, expiry: int, created: int) -> None:
    """ulong above int64 in a property, timestamps anywhere in the int64 range (ms)."""
    props = [None] * 8 + [proton.timestamp(expiry), proton.timestamp(created)]
    secs = [(m.PROPERTIES, props), (m.APPLICATION_PROPERTIES, {"u": proton.ulong(big), "t": proton.timestamp(expiry)}),
            (m.VALUE, None)]
    row = _outcome(m.encode(secs))
    assert row is not None
    for column, ms in (("absolute_expiry_time", expiry), ("creation_time", created)):
        if ms == 0:
            assert row.columns[column] is None
        else:  # exact within float precision (proton hands timestamps out as float seconds)
            assert math.isclose(row.columns[column], ms, rel_tol=1e-15, abs_tol=1), (column, row.columns[column], ms)
    u = dict(row.columns["application_properties"])["u"]
    assert u["type"] == "ulong"
    assert (u["long"] == big) if big < 2**63 else (u["double"] == float(big))


def _id_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, int):
        return str(int(value))
    return str(value)


@seed(SEED)
@FUZZ
@given(m.header(False), m.properties(False), m.property_maps)
def test_well_typed_fields_land_in_their_columns(header: list[Any], props: list[Any], app: dict[Any, Any]) -> None:
    """The oracle: each header/properties field of a well-typed message is read into its column."""
    secs = [(m.HEADER, header), (m.PROPERTIES, props), (m.APPLICATION_PROPERTIES, app), (m.VALUE, "body")]
    row = _outcome(m.encode(secs))
    if row is None:
        return  # refused (e.g. a routing key past the limit); refusals are checked elsewhere
    h = header + [None] * (5 - len(header))
    p = props + [None] * (13 - len(props))
    assert row.columns["durable"] is bool(h[0])
    assert row.columns["priority"] == (4 if h[1] is None else int(h[1]))
    assert row.columns["ttl"] == (int(h[2]) or None if h[2] is not None else None)
    assert row.columns["message_id"] == _id_text(p[0])
    assert row.columns["user_id"] == (p[1] or None)
    assert row.columns["to"] == _c_string(p[2])
    assert row.columns["subject"] == _c_string(p[3])
    assert row.columns["reply_to"] == _c_string(p[4])
    assert row.columns["correlation_id"] == _id_text(p[5])
    assert row.columns["content_type"] == (None if p[6] is None else str(p[6]))
    assert row.columns["content_encoding"] == (None if p[7] is None else str(p[7]))
    for column, ms in (("absolute_expiry_time", p[8]), ("creation_time", p[9])):
        if not ms:
            assert row.columns[column] is None
        else:
            assert math.isclose(row.columns[column], int(ms), rel_tol=1e-15, abs_tol=1), (column, row.columns[column], ms)
    assert row.columns["group_id"] == _c_string(p[10])
    assert row.columns["group_sequence"] == (int(p[11]) or None if p[11] is not None else None)
    assert row.columns["reply_to_group_id"] == _c_string(p[12])
    if "Described(" not in repr(app):
        # (proton's decoder loses map entries after a nested described value: not checked)
        assert [k for k, _ in row.columns["application_properties"]] == [str(k) for k in app]


def _c_string(value: str | None) -> str | None:
    """What proton's C getters give for a properties string: the text up to its first NUL
    (known limitation, reported: a subject 'a\x00b' routes as 'a')."""
    return None if value is None else value.split("\x00", 1)[0]
