"""The Qpid JMS link-name scheme (docs/wire.md §1.4, scenario 50)."""

from __future__ import annotations

import pytest

from sharedsub.core.subscriptions.linknames import (
    LinkName,
    build_link_name,
    parse_link_name,
    plain_consumer_link_name,
    subscription_name_of,
)

# (link name, parsed) — every name docs/wire.md §1.4 lists, then names outside the scheme.
PARSE = [
    ("sub", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=1)),
    ("sub|2", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=2)),
    ("sub|1", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=1)),  # Broker-J tests, §5.15
    ("sub|12", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=12)),
    ("sub|global", LinkName("sub", global_hint=True, volatile_hint=False, ordinal=1)),
    ("sub|global2", LinkName("sub", global_hint=True, volatile_hint=False, ordinal=2)),
    ("sub|volatile1", LinkName("sub", global_hint=False, volatile_hint=True, ordinal=1)),
    ("sub|volatile7", LinkName("sub", global_hint=False, volatile_hint=True, ordinal=7)),
    ("sub|global-volatile1", LinkName("sub", global_hint=True, volatile_hint=True, ordinal=1)),
    ("sub|global-volatile3", LinkName("sub", global_hint=True, volatile_hint=True, ordinal=3)),
    ("my.sub_name", LinkName("my.sub_name", global_hint=False, volatile_hint=False, ordinal=1)),  # docs/peers.md A4.59
    # Outside the scheme: parsed without hints, never an error.
    (
        "qpid-jms:receiver:ID:3f2a-1:1:1:1:topic",
        LinkName("qpid-jms:receiver:ID:3f2a-1:1:1:1:topic", global_hint=False, volatile_hint=False, ordinal=1),
    ),
    ("a|b|c", LinkName("a", global_hint=False, volatile_hint=False, ordinal=None)),
    ("sub|global|x", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=None)),
    ("sub|foo", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=None)),
    ("sub|volatile", LinkName("sub", global_hint=False, volatile_hint=True, ordinal=None)),
    ("sub|0", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=None)),
    ("sub|02", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=None)),
    ("sub|", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=None)),
    ("sub|GLOBAL", LinkName("sub", global_hint=False, volatile_hint=False, ordinal=None)),  # case-sensitive
    ("|global", LinkName("|global", global_hint=False, volatile_hint=False, ordinal=1)),  # '|' at 0: no cut
    ("", LinkName("", global_hint=False, volatile_hint=False, ordinal=1)),
]


@pytest.mark.parametrize(("link_name", "expected"), PARSE, ids=[repr(n) for n, _ in PARSE])
def test_parse(link_name: str, expected: LinkName) -> None:
    assert parse_link_name(link_name) == expected


# (name, shared, durable, global, ordinal, link name) — the table of docs/wire.md §1.4.
BUILD = [
    ("sub", False, True, False, 1, "sub"),
    ("sub", True, True, False, 1, "sub"),
    ("sub", True, True, False, 2, "sub|2"),
    ("sub", True, True, True, 1, "sub|global"),
    ("sub", True, True, True, 2, "sub|global2"),
    ("sub", True, False, False, 1, "sub|volatile1"),
    ("sub", True, False, False, 7, "sub|volatile7"),
    ("sub", True, False, True, 1, "sub|global-volatile1"),
    ("sub", True, False, True, 2, "sub|global-volatile2"),
]


@pytest.mark.parametrize(
    ("name", "shared", "durable", "is_global", "ordinal", "link_name"),
    BUILD,
    ids=[row[-1] for row in BUILD],
)
def test_build_and_parse_back(
    name: str, shared: bool, durable: bool, is_global: bool, ordinal: int, link_name: str
) -> None:
    assert build_link_name(name, shared=shared, durable=durable, is_global=is_global, ordinal=ordinal) == link_name
    parsed = parse_link_name(link_name)
    assert parsed.subscription_name == name
    assert parsed.global_hint is is_global
    assert parsed.volatile_hint is (shared and not durable)
    assert parsed.ordinal == ordinal


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("a|b", {"shared": True, "durable": True}),  # docs/peers.md A4.60: the client refuses '|'
        ("", {"shared": True, "durable": True}),
        ("sub", {"shared": False, "durable": False}),  # a plain consumer has no subscription name
        ("sub", {"shared": False, "durable": True, "is_global": True}),  # unshared durable needs a ClientID
        ("sub", {"shared": False, "durable": True, "ordinal": 2}),  # one active at a time (§5.25)
        ("sub", {"shared": True, "durable": True, "ordinal": 0}),
    ],
    ids=["pipe", "empty", "plain", "unshared-global", "unshared-second", "ordinal-0"],
)
def test_build_refuses(name: str, kwargs: dict[str, bool | int]) -> None:
    with pytest.raises(ValueError, match="must|has no subscription name|needs an explicit ClientID"):
        build_link_name(name, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("link_name", "shared", "expected"),
    [
        ("sub|2", True, "sub"),
        ("sub|global2", True, "sub"),
        ("a|b|c", True, "a"),  # cut at the first '|' (docs/wire.md §2.4)
        ("sub|2", False, "sub|2"),  # unshared: the whole link name
        ("|x", True, "|x"),  # Broker-J cuts only at an index > 0
        ("sub", True, "sub"),
    ],
)
def test_subscription_name_of(link_name: str, shared: bool, expected: str) -> None:
    assert subscription_name_of(link_name, shared=shared) == expected


def test_plain_consumer_link_name() -> None:
    name = plain_consumer_link_name("ID:abc:1:1:1", "prices")
    assert name == "qpid-jms:receiver:ID:abc:1:1:1:prices"
    assert parse_link_name(name) == LinkName(name, global_hint=False, volatile_hint=False, ordinal=1)
