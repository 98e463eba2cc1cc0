"""Addresses and routing keys (DESIGN §3) as a table."""

from __future__ import annotations

import pytest

from sharedsub.addressing import Address, binding_of, parse_address, routing_key
from sharedsub.errors import InvalidAddress


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
