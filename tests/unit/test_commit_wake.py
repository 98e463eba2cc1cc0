"""sharedsub.runtime.commit_wake with real sockets: a front end's signal ends the source's wait."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sharedsub.runtime.commit_wake import CommitListener, CommitSignal, wake_address


def test_the_address_is_one_per_data_dir_whatever_path_names_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    assert wake_address(str(data)) == wake_address(str(tmp_path / "link")) == wake_address(f"{data}/.")
    assert wake_address(str(data)) != wake_address(str(tmp_path))
    assert wake_address(str(data)).startswith(b"\0") and len(wake_address(str(data))) < 108


def test_a_signal_ends_the_wait_and_is_read_once(tmp_path: Path) -> None:
    listener = CommitListener(str(tmp_path))
    signal = CommitSignal(str(tmp_path))
    try:
        assert listener.listening
        threading.Timer(0.05, signal.send).start()
        began = time.monotonic()
        assert listener.wait(5.0) is True
        assert time.monotonic() - began < 4.0  # ended by the signal, not the timeout
        for _ in range(10):
            signal.send()
        assert listener.wait(0.01) is True  # ten queued signals: one wake, all read
        assert listener.wait(0.05) is False  # nothing left: the timeout ends it
    finally:
        signal.close()
        listener.close()


def test_signals_of_another_data_dir_do_not_wake_and_sending_to_nobody_is_harmless(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    listener = CommitListener(str(tmp_path / "a"))
    other = CommitSignal(str(tmp_path / "b"))
    try:
        other.send()  # nobody listens for b: no error
        assert listener.wait(0.05) is False
    finally:
        other.close()
        listener.close()


def test_a_second_listener_of_one_data_dir_only_sleeps(tmp_path: Path) -> None:
    first, second = CommitListener(str(tmp_path)), CommitListener(str(tmp_path))
    signal = CommitSignal(str(tmp_path))
    try:
        assert first.listening and not second.listening
        signal.send()
        began = time.monotonic()
        assert second.wait(0.05) is False
        assert time.monotonic() - began >= 0.04
        assert first.wait(1.0) is True
        first.close()
        third = CommitListener(str(tmp_path))  # the name is free again once closed
        assert third.listening
        third.close()
    finally:
        signal.close()
        second.close()
