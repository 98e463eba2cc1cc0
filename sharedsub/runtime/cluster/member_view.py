"""The other members of a data dir on object storage, as a front end advertises them to clients.

:class:`MemberView` reads the member slots' leases (one LIST of ``_cluster/members/``, then a GET
and a HEAD per slot: sharedsub.runtime.cluster.cluster_status) every ``interval`` seconds on its own thread and keeps
the other members' ``(host, port)`` (sharedsub.core.ownership.members.failover_peers), which the
front end puts in each open frame's ``failover-server-list``. A read that fails keeps what the
last one found (a store that does not answer for a while does not make peers vanish from the
open frames).
"""

from __future__ import annotations

import logging
import threading

from sharedsub.core.ownership.members import failover_peers
from sharedsub.runtime.cluster.cluster_status import read_members
from sharedsub.storage.objects.store import StoreFailure

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 10.0  # seconds between two reads: members come and go rarely; each read is 1 + 2N requests


class MemberView:
    """The other members' addresses of the data dir ``root`` (module docstring)."""

    def __init__(self, root: str, *, interval: float = DEFAULT_INTERVAL) -> None:
        self.root = root
        self.interval = interval
        self.own: str | None = None  # this front end's amqp address, once it listens
        self._peers: tuple[tuple[str, int], ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sharedsub-members", daemon=True)

    def peers(self) -> tuple[tuple[str, int], ...]:
        """The other members' (host, port), in slot order (any thread)."""
        return self._peers

    def refresh(self) -> None:
        """Read the members now (the thread's step)."""
        try:
            members = read_members(self.root)
        except (StoreFailure, ValueError) as exc:
            log.warning("reading the members of %s failed (the last ones read are kept): %s", self.root, exc)
            return
        self._peers = tuple(failover_peers([m.amqp for m in members], self.own))

    def start(self, own: str | None) -> MemberView:
        """Read once, then every ``interval`` seconds; ``own``: this front end's address."""
        self.own = own
        self.refresh()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reading."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()
