"""Addresses and routing keys (docs/design.md §3) as a table."""

from __future__ import annotations

import pytest

from sharedsub.core.addressing import Address, binding_of, parse_address, routing_key
from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.errors import InvalidAddress


@pytest.mark.parametrize(
    ("text", "topic", "suffix"),
    [("orders", "orders", None), ("orders/eu.#", "orders", "eu.#"), ("news.eu/a/b", "news.eu", "a/b"), ("t/", "t", "")],
)
def test_parse(text: str, topic: str, suffix: str | None) -> None:
    assert parse_address(text) == Address(topic, suffix)


@pytest.mark.parametrize("text", ["", None, "/key", "bad name", "-x", "a" * 201])
def test_invalid(text: str | None) -> None:
    with pytest.raises(InvalidAddress):
        parse_address(text)


@pytest.mark.parametrize(
    ("address", "props", "subject", "key"),
    [
        ("t/a.b", {"routing-key": "x"}, "s", "a.b"),  # the address key wins
        ("t", {"routing-key": "x.y"}, "s", "x.y"),
        ("t", {"routing_key": "u"}, "s", "u"),
        ("t", {"routing-key": 5}, "s", "s"),  # not a string: ignored
        ("t", {}, "subj", "subj"),
        ("t", None, None, ""),
    ],
)
def test_routing_key(address: str, props: dict | None, subject: str | None, key: str) -> None:
    assert routing_key(parse_address(address), props, subject) == key


def test_binding_of() -> None:
    assert binding_of(parse_address("t")) == "#"
    assert binding_of(parse_address("t/a.*")) == "a.*"


def test_a_routing_key_past_the_limit_is_refused() -> None:
    from sharedsub.core.fanout.binding import MAX_KEY_LENGTH

    addr = parse_address("t")
    assert routing_key(addr, None, "k" * MAX_KEY_LENGTH) == "k" * MAX_KEY_LENGTH
    with pytest.raises(InvalidAddress, match=f"limit is {MAX_KEY_LENGTH}") as info:
        routing_key(addr, None, "k" * (MAX_KEY_LENGTH + 1))
    assert info.value.condition == AmqpCondition.INVALID_FIELD
    with pytest.raises(InvalidAddress):
        routing_key(parse_address("t/" + "k" * (MAX_KEY_LENGTH + 1)), None, None)


def test_a_binding_pattern_past_the_limit_is_refused() -> None:
    from sharedsub.core.fanout.binding import MAX_PATTERN_LENGTH

    assert binding_of(parse_address("t/" + "a" * MAX_PATTERN_LENGTH)) == "a" * MAX_PATTERN_LENGTH
    with pytest.raises(InvalidAddress, match=f"limit is {MAX_PATTERN_LENGTH}"):
        binding_of(parse_address("t/" + "a" * (MAX_PATTERN_LENGTH + 1)))


def test_application_properties_that_are_not_a_map_give_no_key() -> None:
    """A valid AMQP encoding proton decodes: an application-properties section holding a list."""
    assert routing_key(parse_address("t"), ["routing-key", "x"], "subj") == "subj"  # type: ignore[arg-type]
