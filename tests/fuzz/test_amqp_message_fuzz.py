"""Fuzz of sharedsub.core.publish.amqp_message against the path it replaced (no server).

Whatever bytes a publisher sends, the decoder either refuses them with MessageDecodeError or
InvalidMessage or returns the columns, never anything else; and it agrees with check_encoding +
proton's Message.decode + message_columns (tests/proton_columns.py): the same refusals, the same columns, to,
subject and routing key, up to the divergences sharedsub/core/publish/amqp_message.py documents
(tests/message_oracle.assert_same).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import messages as m
from tests.fuzz.seed import SEED
from tests.message_oracle import assert_same

FUZZ = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@seed(SEED)
@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_agree_with_proton(raw: bytes) -> None:
    assert_same(raw)


@seed(SEED)
@FUZZ
@given(st.data())
def test_mutated_messages_agree_with_proton(data: st.DataObject) -> None:
    parts = [m.encode_section(code, value) for code, value in data.draw(m.sections())]
    assert_same(data.draw(m.mutated(parts)))


@seed(SEED)
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(m.SECTION_CODES), m.values), max_size=5))
def test_sections_of_any_value_agree_with_proton(secs: list[tuple[int, Any]]) -> None:
    assert_same(m.encode(secs))


@seed(SEED)
@FUZZ
@given(st.data())
def test_well_typed_messages_mutated_agree_with_proton(data: st.DataObject) -> None:
    """Mutations of messages whose header and properties are well typed (the usual shape), so
    that the byte changes land in real fields more often than in random values."""
    secs = [(m.HEADER, data.draw(m.header(False))), (m.PROPERTIES, data.draw(m.properties(False))),
            (m.APPLICATION_PROPERTIES, data.draw(m.property_maps)), (m.VALUE, data.draw(m.text))]
    assert_same(data.draw(m.mutated([m.encode_section(code, value) for code, value in secs])))
