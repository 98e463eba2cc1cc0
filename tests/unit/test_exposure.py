"""Secure by default (sharedsub.core.security.exposure): anonymous-open services stay on loopback."""

from __future__ import annotations

import pytest

from sharedsub.core.security.exposure import is_loopback, open_warning, refusal


@pytest.mark.parametrize(
    ("host", "addresses", "loopback"),
    [
        ("127.0.0.1", (), True),
        ("127.0.0.2", (), True),
        ("::1", (), True),
        ("[::1]", (), True),
        ("localhost", (), True),
        ("LOCALHOST", (), True),
        ("0.0.0.0", (), False),
        ("::", (), False),
        ("", (), False),
        ("192.168.1.10", (), False),
        ("10.0.0.1", (), False),
        ("box.example", ("127.0.1.1",), True),
        ("box.example", ("127.0.1.1", "192.168.1.10"), False),
        ("box.example", (), False),  # does not resolve
        ("box.example", ("fe80::1%eth0",), False),
    ],
)
def test_is_loopback(host: str, addresses: tuple[str, ...], loopback: bool) -> None:
    assert is_loopback(host, addresses) is loopback


def test_refused_only_when_anonymous_clients_would_reach_the_network() -> None:
    line = refusal("0.0.0.0", False, False, "auto", "/d/_users.json")
    assert line is not None and "\n" not in line
    for needed in ("0.0.0.0", "/d/_users.json", "[server] host", "[security] users_file", '[security] anonymous = "true"'):
        assert needed in line
    assert refusal("", False, False, "auto", "u") is not None and '""' in refusal("", False, False, "auto", "u")  # type: ignore[operator]
    assert refusal("127.0.0.1", True, False, "auto", "u") is None  # loopback
    assert refusal("0.0.0.0", False, True, "auto", "u") is None  # users: anonymous refused
    assert refusal("0.0.0.0", False, False, "true", "u") is None  # the risk accepted (warned)
    assert refusal("0.0.0.0", False, False, "false", "u") is None  # nobody gets in at all


def test_warning_when_anonymous_clients_reach_the_network() -> None:
    warning = open_warning("0.0.0.0", False, True, ["amqp://0.0.0.0:5672", "amqps://0.0.0.0:5671"])
    assert warning is not None and "amqp://0.0.0.0:5672 and amqps://0.0.0.0:5671" in warning
    assert open_warning("127.0.0.1", True, True, ["amqp://127.0.0.1:5672"]) is None
    assert open_warning("0.0.0.0", False, False, ["amqp://0.0.0.0:5672"]) is None
