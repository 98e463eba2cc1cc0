"""One data dir, one owner: a second ``serve`` on a served data dir is refused at start,
naming the owner, and the first goes on serving; a SIGKILLed owner does not block its restart."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from proton import Message

from tests.amqp_peer import Subscriber, publish
from tests.service import ROOT, ServeProcess

pytestmark = pytest.mark.e2e


def _second_serve(data_dir: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run(
        [sys.executable, "-m", "sharedsub", "serve", "--data-dir", data_dir, "--port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )


def test_a_second_serve_on_a_served_data_dir_is_refused_naming_the_owner(service: ServeProcess, topic: str) -> None:
    second = _second_serve(str(service.data_dir))
    assert second.returncode == 5, second.stderr[-2000:]
    assert f"in use by process {service.pid}" in second.stderr
    assert service.url in second.stderr  # amqp://host:port of the owner
    assert "sharedsub ready" not in second.stdout
    with Subscriber(service.url, topic) as sub:
        sub.wait_attached()
        assert [o.state for o in publish(service.url, topic, [Message(body="still-served")])] == ["accepted"]
        sub.wait_count(1)


def test_the_lock_dies_with_its_process(tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("owner")
    first = ServeProcess(data, command="frontend").start()
    first.kill()
    second = ServeProcess(data, command="frontend").start()
    try:
        assert second.ready
    finally:
        assert second.stop() == 0


def test_a_served_data_dir_is_owner_only(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A data dir ``frontend`` creates is 0700, its ``_service.json`` (which holds the admin token)
    and owner lock 0600, and nothing it writes there is open to group or others, even when it
    was started with a permissive umask."""
    import stat

    from sharedsub.runtime.discovery import read_service_file

    data = tmp_path_factory.mktemp("private") / "data"  # not there yet: the service creates it
    previous = os.umask(0o022)  # the child inherits it
    try:
        svc = ServeProcess(data, command="frontend", extra_args=["--auto-create-topics"]).start()
    finally:
        os.umask(previous)
    try:
        assert [o.state for o in publish(svc.url, "private-topic", [Message(body="x")])] == ["accepted"]
        mode = lambda name: stat.S_IMODE((data / name).stat().st_mode)  # noqa: E731
        assert (mode("."), mode("_service.json"), mode("_owner.lock")) == (0o700, 0o600, 0o600)
        info = read_service_file(str(data))
        assert info is not None and info.admin_token  # the admin token is in that file only
        assert info.admin_token not in svc.log()
        created = [os.path.join(d, n) for d, dirs, files in os.walk(data) for n in dirs + files]
        assert any("private-topic" in p for p in created)
        assert [p for p in created if os.stat(p).st_mode & 0o077] == []
    finally:
        assert svc.stop() == 0
