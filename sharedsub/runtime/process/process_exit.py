"""Ending a long-running process once its own shutdown is complete.

The service's native libraries (delta-rs's async runtime, Arrow's thread pools) keep threads of
their own that Python never joins. When the interpreter finalizes while one of them still touches
Python or freed state, the process can die of SIGSEGV *after* it logged "stopped" — an operator or
supervisor then sees a crash where the service in fact stopped cleanly, and a fresh start reports
an unclean stop. CI saw exactly that once (a `serve` on a bucket exited -11 after "stopped").

So a process whose shutdown already released every lease, stopped every thread of ours and wrote
its last state ends with :func:`exit_after_clean_stop`: it flushes what Python buffers and leaves
without finalization. Nothing durable depends on finalization — every write the service makes is
committed or fsynced before its shutdown returns.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def exit_after_clean_stop(code: int) -> NoReturn:
    """Flush logging, stdout and stderr, then end the process with ``code`` without running the
    interpreter's finalization (atexit handlers, module teardown, native thread races)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said there
            pass
    os._exit(code)
