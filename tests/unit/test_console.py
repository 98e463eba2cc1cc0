"""Lines on stdout and stderr are whole writes (sharedsub/runtime/process/console.py), log records too
(sharedsub/runtime/process/logformat.py LineHandler): a line and its newline never reach the stream in two
calls, which another thread's line could come between (the torn ready line of issue 40)."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from sharedsub.runtime.process import console
from sharedsub.runtime.process.logformat import LineHandler, configure_logging


class Calls(io.StringIO):
    """A text stream that records each write call and each flush."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)

    def flush(self) -> None:
        self.calls.append("<flush>")


def test_out_and_err_write_each_line_with_its_newline_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = Calls(), Calls()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    console.out("sharedsub ready amqp://127.0.0.1:5672")
    console.err("[fanout] a line")
    console.write(sys.stderr, "\rreading 1/2")
    assert out.calls == ["sharedsub ready amqp://127.0.0.1:5672\n", "<flush>"]
    assert err.calls == ["[fanout] a line\n", "<flush>", "\rreading 1/2", "<flush>"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_log_record_is_one_write_with_its_newline(fmt: str) -> None:
    stream = Calls()
    configure_logging("INFO", fmt, stream)
    try:
        assert isinstance(logging.getLogger().handlers[0], LineHandler)
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("sharedsub.test").exception("failed with\na second line")
        writes = [c for c in stream.calls if c != "<flush>"]
        assert len(writes) == 1 and writes[0].endswith("\n") and "boom" in writes[0]
    finally:
        configure_logging("WARNING", "text")  # as tests/unit/test_logformat.py leaves it
