"""Authorization against a real ``sharedsub frontend`` (no fan-out: nothing here needs routing) with a users file
and a permissions file (sharedsub.core.security.permissions), driven by python-qpid-proton clients that authenticate with PLAIN.

Users alice and bob may publish to ``orders`` and consume ``orders`` and ``prices``; carol (group
ops) may consume and manage everywhere; anonymous connections (allowed here) may consume
``prices`` only. Each refusal is checked for its condition and the permission it names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message

from sharedsub.runtime import users as uf
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, publish, uid, wait_for
from tests.service import ROOT, ServeProcess

pytestmark = pytest.mark.e2e

UNAUTHORIZED = "amqp:unauthorized-access"
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}

POLICY = """
[groups]
ops = ["carol"]

[[grant]]
to = ["alice", "bob"]
publish = "orders"
consume = ["orders", "prices"]

[[grant]]
to = "group:ops"
consume = "*"
manage = "*"

[[grant]]
to = "anonymous"
consume = "prices"
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Path]]:
    tmp = tmp_path_factory.mktemp("authz")
    data = tmp / "data"
    for topic in ("orders", "prices", "secret"):
        create_topic(str(data), topic)
    table: uf.UsersTable = {}
    for name, password in PASSWORDS.items():
        table = uf.add_user(table, name, password, iterations=4096)
    uf.save_users(uf.users_path(str(data), ""), table)
    perms = tmp / "permissions.toml"
    perms.write_text(POLICY)
    env = {
        "SHAREDSUB_SECURITY_ANONYMOUS": "true",
        "SHAREDSUB_SECURITY_PERMISSIONS_FILE": str(perms),
        "SHAREDSUB_SERVER_HTTP_PORT": "-1",
    }
    proc = ServeProcess(data, command="frontend", env=env, ready_timeout=60).start()
    try:
        yield proc, perms
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def _url(proc: ServeProcess, user: str | None) -> str:
    if user is None:
        return proc.url
    return proc.url.replace("amqp://", f"amqp://{user}:{PASSWORDS[user]}@")


def _publish_refusal(url: str, topic: str | None, messages: list[Message]) -> str:
    try:
        publish(url, topic, messages, timeout=30)
    except AssertionError as exc:
        return str(exc)
    return "accepted"


def test_publish_needs_the_publish_permission(service: tuple[ServeProcess, Path]) -> None:
    proc, _ = service
    assert [o.state for o in publish(_url(proc, "alice"), "orders", [Message(body="o1")])] == ["accepted"]
    refused = _publish_refusal(_url(proc, "alice"), "prices", [Message(body="p1")])
    assert UNAUTHORIZED in refused and "user 'alice' has no publish permission on topic 'prices'" in refused
    refused = _publish_refusal(_url(proc, None), "orders", [Message(body="o2")])
    assert UNAUTHORIZED in refused and "an anonymous connection has no publish permission" in refused


def test_anonymous_relay_checks_each_message(service: tuple[ServeProcess, Path]) -> None:
    proc, _ = service
    outcomes = publish(
        _url(proc, "bob"),
        None,
        [Message(address="orders", body="ok"), Message(address="prices", body="no"), Message(address="orders/k", body="ok")],
    )
    assert [o.state for o in outcomes] == ["accepted", "rejected", "accepted"]
    assert outcomes[1].condition == UNAUTHORIZED
    assert "no publish permission on topic 'prices'" in (outcomes[1].description or "")


@pytest.mark.parametrize(("user", "topic", "allowed"), [
    ("alice", "orders", True),
    ("alice", "secret", False),
    (None, "prices", True),
    (None, "orders", False),
    ("carol", "secret", True),
])
def test_consume_needs_the_consume_permission(
    service: tuple[ServeProcess, Path], user: str | None, topic: str, allowed: bool
) -> None:
    proc, _ = service
    with Subscriber(_url(proc, user), topic) as sub:
        if allowed:
            sub.wait_attached()
            return
        condition, description = sub.wait_refused()
    assert condition == UNAUTHORIZED
    assert f"has no consume permission on topic {topic!r}" in description
    assert sub.remote_source == {} or sub.remote_source["is_null"]


def _durable(proc: ServeProcess, user: str, name: str, container: str, *, address: str | None = "orders",
             selector: str | None = None) -> Subscriber:
    return Subscriber(
        _url(proc, user), address, name=name, container_id=container, capabilities=["shared"],
        durable=2, expiry="never", selector=selector,
    )


def test_a_subscription_belongs_to_its_creator(service: tuple[ServeProcess, Path]) -> None:
    proc, _ = service
    container, name = uid("app"), uid("sub")
    with _durable(proc, "alice", name, container) as mine:
        mine.wait_attached()
        assert mine.detach() == (None, None)  # closed=false: the durable subscription stays
    owner = {r.identity.name: r.owner for r in load_catalog(str(proc.data_dir)).values()}
    assert owner[name] == "alice"
    shown = subprocess.run(
        [sys.executable, "-m", "sharedsub", "subscriptions", "show", f"{container}:{name}", "--data-dir", str(proc.data_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert any(line.split() == ["owner", "alice"] for line in shown.stdout.splitlines()), shown.stdout

    # bob, same ClientID and name: join, re-create with a selector, look up to unsubscribe.
    for kwargs in ({}, {"selector": "x = 1"}, {"address": None}):
        with _durable(proc, "bob", name, container, **kwargs) as theirs:  # type: ignore[arg-type]
            condition, description = theirs.wait_refused()
        assert condition == UNAUTHORIZED, kwargs
        assert f"subscription {name!r} on topic 'orders' belongs to another user" in description
        assert "user 'bob' needs the manage permission" in description

    # carol manages: she may attach (and unsubscribe); alice still owns it afterwards.
    with _durable(proc, "carol", name, container) as manager:
        manager.wait_attached()
        manager.detach()
    with _durable(proc, "alice", name, container) as again:
        again.wait_attached()
        assert again.detach(closed=True) == (None, None)  # unsubscribe by the owner
    owner = {r.identity.name: (r.owner, r.active) for r in load_catalog(str(proc.data_dir)).values()}
    assert owner[name] == ("alice", False)


def test_an_anonymous_subscription_has_no_owner(service: tuple[ServeProcess, Path]) -> None:
    proc, _ = service
    container, name = uid("anon"), uid("sub")
    with Subscriber(_url(proc, None), "prices", name=name, container_id=container, capabilities=["shared"],
                    durable=2, expiry="never") as anon:
        anon.wait_attached()
        anon.detach()
    with Subscriber(_url(proc, "bob"), "prices", name=name, container_id=container, capabilities=["shared"],
                    durable=2, expiry="never") as bob:
        bob.wait_attached()
        bob.detach(closed=True)


def test_an_edited_permissions_file_takes_effect_without_a_restart(service: tuple[ServeProcess, Path]) -> None:
    proc, perms = service
    assert UNAUTHORIZED in _publish_refusal(_url(proc, "bob"), "secret", [Message(body="s")])
    perms.write_text(POLICY + '\n[[grant]]\nto = "bob"\npublish = "secret"\n')
    wait_for(lambda: _publish_refusal(_url(proc, "bob"), "secret", [Message(body="s")]) == "accepted", 30,
             "bob's new grant to be read")
    perms.write_text("[[grant]]\nthis is not toml")
    # The file is looked at when a permission is checked: publish until the broken edit is logged.
    wait_for(
        lambda: _publish_refusal(_url(proc, "bob"), "secret", [Message(body="s")]) == "accepted"
        and "keeping the permissions read before" in proc.log(),
        30,
        "the broken edit to be logged while the last good grants stay",
    )
    perms.write_text(POLICY)  # as the other tests expect it
    wait_for(lambda: UNAUTHORIZED in _publish_refusal(_url(proc, "bob"), "secret", [Message(body="s")]), 30,
             "the grant to go")


@pytest.mark.parametrize(("content", "complaint"), [
    (None, "does not exist"),
    ("[[grant]]\npublish = 'x'\n", "needs 'to'"),
])
def test_a_missing_or_broken_permissions_file_stops_the_start(tmp_path: Path, content: str | None, complaint: str) -> None:
    perms = tmp_path / "permissions.toml"
    if content is not None:
        perms.write_text(content)
    env = {**os.environ, "SHAREDSUB_SECURITY_PERMISSIONS_FILE": str(perms), "SHAREDSUB_SERVER_HTTP_PORT": "-1"}
    done = subprocess.run(
        [sys.executable, "-m", "sharedsub", "frontend", "--data-dir", str(tmp_path / "data"), "--port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "security.permissions_file" in done.stderr and complaint in done.stderr
