"""Lines the project's own code writes to stdout and stderr: each one whole write, under one lock.

Why: ``print(text)`` writes the text and its newline in two calls. With stdout and stderr on one
pipe, unbuffered (a supervisor's, the tests'; ``PYTHONUNBUFFERED=1``), a line another thread wrote
between the two (the fan-out's relay in sharedsub.runtime.fanout_process, a log record) tore the
ready line of ``sharedsub serve``: ``sharedsub ready amqp://127.0.0.1:376292026-11-28 ...``.

Contract: :func:`out` and :func:`err` write ``line`` and its newline as one ``write`` on the
stream, then flush, under one lock for the process; :func:`write` does the same for text that
brings its own ends (a progress line that starts with a carriage return). Logging's handler
writes each record through :func:`write` (sharedsub.runtime.process.logformat), so within a process no
two lines mix. Across processes (the fan-out child writes to the same stderr) an unbuffered
stream turns each call into one ``write(2)``, which a pipe keeps whole up to ``PIPE_BUF`` (4096)
bytes.

The streams are looked up at each call (``sys.stdout``/``sys.stderr``), so a test's capture sees
the lines. The lock is re-entrant: a signal handler that logs while its thread is inside a write
must not deadlock; and it is renewed in a forked child, where the thread that held it is gone.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TextIO

_lock = threading.RLock()


def write(stream: TextIO, text: str) -> None:
    """Write ``text`` to ``stream`` in one call and flush, under the process's console lock."""
    with _lock:
        stream.write(text)
        stream.flush()


def out(line: str) -> None:
    """``line`` and a newline on stdout, in one write."""
    write(sys.stdout, line + "\n")


def err(line: str) -> None:
    """``line`` and a newline on stderr, in one write."""
    write(sys.stderr, line + "\n")


def _renew_lock() -> None:
    # A forked child's copy may be held by a thread the child does not have.
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_renew_lock)
