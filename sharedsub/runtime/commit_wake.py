"""The front ends' commit signal to the fan-out's source on the same host (sharedsub.core.fanout.batch_hold).

After each group that committed a topic table, a front end sends one empty datagram to a Unix
socket in Linux's abstract namespace, named after the data dir's real path; the fan-out's source,
holding its ``latestOffset`` call, listens there and probes the topics at once instead of at the
next trigger. The signal carries nothing: the probe reads what was committed from the tables,
so a lost, late, duplicated or forged datagram costs at most one probe, and no signal at all (no
listener, another host, a system without abstract sockets) leaves the source probing every
``hold`` seconds as a trigger would.

Why a datagram to an abstract name: it needs no file in the data dir (which may be a bucket) and
nothing to clean up after a kill -9; sending is one non-blocking syscall, which fails at once
when nobody listens; the listener's queue holds many signals, and a full one (the source is busy
anyway) drops the new ones, which is fine.
"""

from __future__ import annotations

import hashlib
import logging
import os
import select
import socket

log = logging.getLogger("sharedsub.commit_wake")

# Datagrams a woken listener reads and drops at most per wake (they say nothing more than one).
_DRAIN = 256


def wake_address(data_dir: str) -> bytes:
    """The abstract socket name of ``data_dir``'s signal: one per data dir per host, the same for
    every process that names the dir (a relative path, a symlink) and within the 108-byte limit."""
    real = os.path.realpath(data_dir) if "://" not in data_dir else data_dir
    digest = hashlib.sha256(real.encode("utf-8")).hexdigest()[:32]
    return b"\0sharedsub-commits-" + digest.encode("ascii")


class CommitSignal:
    """A front end's sending side: :meth:`send` after a group that committed a topic table.
    Never raises and never blocks."""

    def __init__(self, data_dir: str) -> None:
        self._address = wake_address(data_dir)
        self._sock: socket.socket | None = None
        try:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        except OSError as exc:  # no Unix sockets here: the source probes on its own
            log.debug("no commit signal: %s", exc)

    def send(self) -> None:
        """Tell a listening source that a topic table has a new commit (dropped when none listens)."""
        if self._sock is None:
            return
        try:
            self._sock.sendto(b"", self._address)
        except OSError:  # nobody listens (ECONNREFUSED), or its queue is full (EAGAIN): either is fine
            pass

    def close(self) -> None:
        """Release the socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class CommitListener:
    """The fan-out source's receiving side. :meth:`wait` sleeps until a signal or the timeout;
    without a socket (another listener holds the name, no abstract sockets) it just sleeps."""

    def __init__(self, data_dir: str) -> None:
        self._sock: socket.socket | None = None
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.bind(wake_address(data_dir))
            sock.setblocking(False)
            self._sock = sock
        except OSError as exc:
            # EADDRINUSE: another fan-out of this data dir listens (one routes at a time; this one
            # sees commits by probing). Anything else: no abstract sockets on this system.
            log.info("the fan-out's source probes without the front ends' commit signal (%s)", exc)

    @property
    def listening(self) -> bool:
        """Whether signals reach this listener."""
        return self._sock is not None

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True when a signal ended it (every queued one is read)."""
        if timeout <= 0:
            return self._drain()
        if self._sock is None:
            select.select([], [], [], timeout)
            return False
        ready, _, _ = select.select([self._sock], [], [], timeout)
        return bool(ready) and self._drain()

    def _drain(self) -> bool:
        """Read the queued signals; True when there was one."""
        if self._sock is None:
            return False
        got = False
        for _ in range(_DRAIN):
            try:
                self._sock.recv(1)
            except (BlockingIOError, InterruptedError):
                break
            got = True
        return got

    def close(self) -> None:
        """Release the name (another source may listen then)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
