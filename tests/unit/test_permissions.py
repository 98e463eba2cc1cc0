"""sharedsub.core.security.permissions as tables: pattern matching, grants, ownership, file parsing; and the
store's reload of a changed file (sharedsub.runtime.permissions_file, on a real file)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from sharedsub.core.conditions import AmqpCondition
from sharedsub.core.errors import ConfigError, Unauthorized
from sharedsub.core.security.permissions import OPEN, Permission, parse_policy, topic_matches
from sharedsub.runtime.permissions_file import PolicyStore

P, C, M = Permission.PUBLISH, Permission.CONSUME, Permission.MANAGE

EXAMPLE = Path(__file__).resolve().parents[2] / "conf" / "permissions.example.toml"


@pytest.mark.parametrize(
    ("pattern", "topic", "matches"),
    [
        ("orders", "orders", True),
        ("orders", "orders2", False),
        ("orders", "order", False),
        ("*", "anything", True),
        ("orders-*", "orders-eu", True),
        ("orders-*", "orders-", True),
        ("orders-*", "orders", False),
        ("*-eu", "orders-eu", True),
        ("*-eu", "orders-us", False),
        ("a*b*c", "abc", True),
        ("a*b*c", "a-b-c", True),
        ("a*b*c", "acb", False),
        ("ab*ba", "aba", False),  # the pieces must not overlap
        ("ab*ba", "abba", True),
        ("a*a*a*a*b", "a" * 200, False),  # no backtracking blow-up
        ("**", "x", True),
        ("x.*", "xy", False),  # '.' is literal
    ],
)
def test_topic_patterns(pattern: str, topic: str, matches: bool) -> None:
    assert topic_matches(pattern, topic) is matches


def _example():  # type: ignore[no-untyped-def]
    with open(EXAMPLE, "rb") as fh:
        return parse_policy(tomllib.load(fh))


@pytest.mark.parametrize(
    ("user", "permission", "topic", "allowed"),
    [
        ("alice", P, "orders", True),  # group:traders
        ("alice", P, "orders-eu", True),
        ("alice", P, "prices", False),
        ("alice", C, "prices", True),
        ("alice", M, "orders", False),
        ("bob", C, "orders-us", True),
        ("carol", C, "orders", True),  # group:operators: consume and manage everywhere
        ("carol", M, "orders", True),
        ("carol", P, "orders", False),
        ("dave", C, "prices", True),  # '*': every authenticated user
        ("dave", C, "orders", False),
        ("dave", P, "prices", False),
        (None, C, "prices", False),  # '*' is not anonymous
        (None, P, "orders", False),
    ],
)
def test_example_file(user: str | None, permission: Permission, topic: str, allowed: bool) -> None:
    policy = _example()
    assert policy.allows(user, permission, topic) is allowed
    if allowed:
        policy.check(user, permission, topic)
    else:
        with pytest.raises(Unauthorized) as info:
            policy.check(user, permission, topic)
        assert info.value.condition is AmqpCondition.UNAUTHORIZED_ACCESS
        assert f"no {permission} permission on topic {topic!r}" in info.value.description


def test_anonymous_principal() -> None:
    policy = parse_policy({"grant": [{"to": "anonymous", "publish": "public"}]})
    assert policy.allows(None, P, "public")
    assert not policy.allows("alice", P, "public")
    with pytest.raises(Unauthorized, match="an anonymous connection has no consume permission"):
        policy.check(None, C, "public")


@pytest.mark.parametrize(
    ("permission", "allowed"),
    [(P, True), (C, True), (M, False)],
)
def test_open_policy(permission: Permission, allowed: bool) -> None:
    for user in (None, "alice"):
        assert OPEN.allows(user, permission, "any-topic") is allowed


@pytest.mark.parametrize(
    ("user", "owner", "allowed"),
    [
        ("alice", "alice", True),
        ("bob", "alice", False),
        ("carol", "alice", True),  # manage on the topic
        (None, "alice", False),
        ("bob", None, True),  # no owner: made anonymously or before owners were recorded
        (None, None, True),
    ],
)
def test_subscription_ownership(user: str | None, owner: str | None, allowed: bool) -> None:
    policy = _example()
    if allowed:
        policy.check_subscription(user, owner, "orders", "sub1")
    else:
        with pytest.raises(Unauthorized) as info:
            policy.check_subscription(user, owner, "orders", "sub1")
        text = info.value.description
        assert "subscription 'sub1' on topic 'orders' belongs to another user" in text
        assert "needs the manage permission" in text
        assert repr(owner) not in text  # the owner's name is not told to others


def test_open_policy_keeps_subscriptions_apart() -> None:
    OPEN.check_subscription("alice", "alice", "t", "s")
    with pytest.raises(Unauthorized):
        OPEN.check_subscription("bob", "alice", "t", "s")


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"grants": []}, "unknown table(s) grants"),
        ({"grant": {"to": "a"}}, "array of tables"),
        ({"grant": [{"publish": "t"}]}, "needs 'to'"),
        ({"grant": [{"to": "a", "read": "t"}]}, "unknown key(s) read"),
        ({"grant": [{"to": "group:nobody", "publish": "t"}]}, "names no group"),
        ({"grant": [{"to": "a", "publish": 3}]}, "publish must be a string or a list"),
        ({"grant": [{"to": [], "publish": "t"}]}, None),  # no principals: grants nothing, allowed
        ({"groups": {"g": "alice"}, "grant": [{"to": "group:g", "consume": ["t", ""]}]}, "non-empty strings"),
        ({"groups": ["g"]}, "[groups] must be a table"),
    ],
)
def test_bad_files(document: dict, complaint: str | None) -> None:  # type: ignore[type-arg]
    if complaint is None:
        assert not parse_policy(document).allows("a", P, "t")
        return
    with pytest.raises(ConfigError) as info:
        parse_policy(document)
    assert info.value.key == "security.permissions_file"
    assert complaint in info.value.description


def test_store_reads_a_changed_file_again(tmp_path: Path) -> None:
    now = [0.0]
    path = tmp_path / "perms.toml"
    path.write_text('[[grant]]\nto = "alice"\npublish = "a"\n')
    store = PolicyStore(str(path), clock=lambda: now[0])
    assert store.policy.allows("alice", P, "a")
    path.write_text('[[grant]]\nto = "alice"\npublish = ["a", "b"]\n')
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert not store.policy.allows("alice", P, "b")  # looked at no more than once a second
    now[0] = 1.5
    assert store.policy.allows("alice", P, "b")
    path.write_text("not toml [[[")
    os.utime(path, ns=(2, 2))
    now[0] = 3.0
    assert store.policy.allows("alice", P, "b")  # a broken edit keeps the last good policy


def test_store_refuses_a_missing_or_broken_file_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        PolicyStore(str(tmp_path / "absent.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("[[grant]]\npublish = 'x'\n")
    with pytest.raises(ConfigError, match="needs 'to'"):
        PolicyStore(str(bad))
    assert PolicyStore("").policy is OPEN
