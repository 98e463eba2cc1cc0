"""Owner-only files (issue 12): the data dir is 0700, ``_service.json``,
the owner lock and the users file 0600, and the ``sharedsub`` command creates everything
with group and other bits masked. Real files under a permissive umask (022, as most shells)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharedsub import cli
from sharedsub.runtime import users as uf
from sharedsub.runtime.cluster.data_dir_owner import own_data_dir
from sharedsub.runtime.discovery import (
    ServiceInfo,
    read_service_file,
    remove_service_file,
    running_service,
    running_services,
    write_service_file,
)
from sharedsub.storage.owner_only import ensure_data_dir, open_to_others, owner_only_umask
from sharedsub.storage.topics import create_topic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_ensure_data_dir_creates_it_0700_with_parents(tmp_path: Path) -> None:
    root = tmp_path / "a" / "data"
    assert ensure_data_dir(str(root)) is True
    assert _mode(root) == 0o700
    assert ensure_data_dir(str(root)) is False  # already there: left as it is
    assert ensure_data_dir(f"file://{tmp_path / 'uri'}") is True and _mode(tmp_path / "uri") == 0o700
    assert ensure_data_dir("s3://bucket/data") is False


def test_an_existing_dir_open_to_others_is_reported_not_changed(tmp_path: Path) -> None:
    root = tmp_path / "shared"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    assert ensure_data_dir(str(root)) is False
    assert _mode(root) == 0o755 and open_to_others(str(root)) == 0o755
    os.chmod(root, 0o700)
    assert open_to_others(str(root)) is None
    assert open_to_others(str(tmp_path / "missing")) is None


def test_owner_only_umask_adds_group_and_other_bits() -> None:
    os.umask(0o002)
    assert owner_only_umask() == 0o002
    assert os.umask(0o022) == 0o077
    os.umask(0o027)
    owner_only_umask()
    assert os.umask(0o022) == 0o077


def test_creating_a_topic_creates_the_data_dir_0700(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    create_topic(str(root), "orders")
    assert _mode(root) == 0o700


def test_the_users_file_is_0600_in_a_0700_dir(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "_users.json"
    uf.save_users(str(path), uf.add_user({}, "alice", "pw"))
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700


def test_the_service_file_and_the_owner_lock_are_0600(tmp_path: Path) -> None:
    os.umask(0)  # even with nothing masked
    info = ServiceInfo(os.getpid(), "127.0.0.1", 5672, "127.0.0.1", 8161, 0.0)
    write_service_file(str(tmp_path), info)
    assert _mode(tmp_path / "_service.json") == 0o600
    assert read_service_file(str(tmp_path)) == info
    lock = own_data_dir(str(tmp_path))
    try:
        assert _mode(tmp_path / "_owner.lock") == 0o600
    finally:
        lock.release()


def test_an_older_lock_file_is_made_0600(tmp_path: Path) -> None:
    (tmp_path / "_owner.lock").touch(mode=0o644)
    os.chmod(tmp_path / "_owner.lock", 0o644)
    own_data_dir(str(tmp_path)).release()
    assert _mode(tmp_path / "_owner.lock") == 0o600


def test_the_cli_creates_everything_owner_only_and_restores_the_umask(tmp_path: Path) -> None:
    root = tmp_path / "cli-data"
    assert cli.main(["topics", "create", "orders", "--data-dir", str(root)]) == 0
    assert os.umask(0o022) == 0o022  # the caller's umask is back
    assert _mode(root) == 0o700
    created = [Path(d) / n for d, dirs, files in os.walk(root) for n in dirs + files]
    assert created, "the topic table has files"
    assert [(str(p), oct(_mode(p))) for p in created if _mode(p) & 0o077] == []


def test_members_of_one_bucket_on_one_host_each_record_their_service_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On object storage the service files live in this host's state dir, one per member slot:
    a second member does not overwrite the first's; the command line finds the live member in
    the lowest slot; a member removes only its own file."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = "s3://bucket/members"
    first = ServiceInfo(os.getpid(), "127.0.0.1", 5672, "127.0.0.1", 8161, 0.0)
    second = ServiceInfo(os.getppid(), "127.0.0.1", 5673, "127.0.0.1", 8162, 0.0)
    gone = ServiceInfo(2**22 + 7, "127.0.0.1", 5674, None, None, 0.0)  # above the kernel's pid limit
    write_service_file(root, gone, 3)
    write_service_file(root, second, 1)
    assert running_service(root) == second  # slot 3's process is gone
    write_service_file(root, first, 0)
    assert (read_service_file(root, 0), read_service_file(root, 1)) == (first, second)
    assert running_services(root) == [first, second] and running_service(root) == first
    remove_service_file(root, second.pid, 0)  # not slot 0's process: slot 0's file stays
    remove_service_file(root, first.pid, 0)
    assert running_services(root) == [second]
