"""The users file (sharedsub/runtime/users.py): format, add/remove rules, owner-only writes, live reload;
and ``sharedsub users`` exit codes."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest

from sharedsub.cli import main
from sharedsub.core.errors import ConfigError, InvalidUser, UserExists, UserNotFound
from sharedsub.core.security import scram
from sharedsub.runtime import users as uf


def test_add_stores_only_scram_keys_and_round_trips() -> None:
    table = uf.add_user({}, "alice", "s3cret")
    assert set(table["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    text = uf.render_users(table)
    assert "s3cret" not in text and json.loads(text)["format"] == 1
    assert uf.parse_users(text) == table
    assert all(scram.check_password(c, "s3cret") for c in table["alice"].values())


@pytest.mark.parametrize(
    ("name", "password", "error"),
    [("alice", "x", UserExists), ("b,ad", "x", InvalidUser), ("", "x", InvalidUser), ("-x", "x", InvalidUser),
     ("a" * 129, "x", InvalidUser), ("bob", "", InvalidUser)],
)
def test_add_refusals(name: str, password: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        uf.add_user(uf.add_user({}, "alice", "pw"), name, password)


def test_remove() -> None:
    table = uf.add_user(uf.add_user({}, "alice", "pw"), "bob", "pw")
    assert list(uf.remove_user(table, "alice")) == ["bob"]
    with pytest.raises(UserNotFound):
        uf.remove_user(table, "carol")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("not json", "not JSON"),
        ('{"format": 2, "users": {}}', "not a sharedsub users file"),
        ('{"format": 1, "users": {"a,b": {}}}', "bad entry"),
        ('{"format": 1, "users": {"a": {"SCRAM-SHA-256": "x"}}}', "not a SCRAM credential"),
        ('{"format": 1, "users": {"a": {"SCRAM-SHA-512": "' + scram.derive("p", "SCRAM-SHA-256").to_text() + '"}}}',
         "holds a SCRAM-SHA-256"),
    ],
)
def test_invalid_files(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        uf.parse_users(text)


def test_save_is_owner_only_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "users.json"
    uf.save_users(str(path), uf.add_user({}, "alice", "pw"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    uf.save_users(str(path), {})
    assert uf.load_users(str(path)) == {} and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["users.json"]  # no temporary file left
    assert uf.load_users(str(tmp_path / "missing.json")) == {}


def test_store_reloads_a_changed_file_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    path = str(tmp_path / "users.json")
    store = uf.UserStore(path)
    assert store.lookup("alice") == {}
    uf.save_users(path, uf.add_user({}, "alice", "pw"))
    assert set(store.lookup("alice")) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    Path(path).write_text("broken")
    assert store.lookup("alice")  # logged, the users read before stay
    os.unlink(path)
    assert store.lookup("alice") == {}


def test_store_refuses_a_broken_file_at_start(tmp_path: Path) -> None:
    (tmp_path / "users.json").write_text("{}")
    with pytest.raises(ConfigError):
        uf.UserStore(str(tmp_path / "users.json"))


def test_users_path() -> None:
    assert uf.users_path("/d", "") == "/d/_users.json"
    assert uf.users_path("/d", "/etc/u.json") == "/etc/u.json"


def test_cli_add_list_remove_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\n"))
    assert main(["users", "add", "alice", "--password-stdin", *data]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("other\n"))
    assert main(["users", "add", "alice", "--password-stdin", *data]) == 4
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal, no --password-stdin
    assert main(["users", "add", "bob", *data]) == 2
    assert main(["users", "remove", "bob", *data]) == 3
    capsys.readouterr()
    assert main(["users", "list", "--json", *data]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}]
    assert main(["users", "remove", "alice", *data]) == 0
    out = capsys.readouterr()
    assert "s3cret" not in out.out + out.err
    assert stat.S_IMODE((tmp_path / "_users.json").stat().st_mode) == 0o600
