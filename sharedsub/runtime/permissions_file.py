"""The permissions file as the front end reads it (the rules are sharedsub.core.security.permissions).

``[security] permissions_file`` names a TOML file (format: conf/permissions.example.toml). ""
means none: :data:`sharedsub.core.security.permissions.OPEN`. The file is read at start (a broken or missing
file stops the service from starting: it must not start more open than configured) and again
when its inode, size or mtime changed, looked at no more than once a second; a file that became
unreadable or invalid while running is logged and the last good policy is kept.
"""

from __future__ import annotations

import logging
import os
import time
import tomllib
from collections.abc import Callable

from sharedsub.core.errors import ConfigError
from sharedsub.core.security.permissions import OPEN, Policy, parse_policy

log = logging.getLogger(__name__)

CHECK_INTERVAL = 1.0
"""Seconds between two looks at the file's stat."""


def load_policy(path: str) -> Policy:
    """The policy in ``path``.

    Raises:
        ConfigError: the file is missing, unreadable, not TOML or not a permissions file.
    """
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError("security.permissions_file", f"{path} does not exist") from None
    except OSError as exc:
        raise ConfigError("security.permissions_file", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("security.permissions_file", f"{path} is not valid TOML: {exc}") from None
    return parse_policy(document, source=path)


class PolicyStore:
    """The current policy; :attr:`policy` re-reads a changed file (see module docstring)."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        """Read ``path`` ("" = no file: the open policy).

        Raises:
            ConfigError: as :func:`load_policy`.
        """
        self.path = path
        self._clock = clock
        self._policy = load_policy(path) if path else OPEN
        self._stamp = self._stat()
        self._checked = clock()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    @property
    def policy(self) -> Policy:
        """The policy, read again first when the file changed (at most one stat a second)."""
        if not self.path:
            return self._policy
        now = self._clock()
        if now - self._checked >= CHECK_INTERVAL:
            self._checked = now
            self._reload_if_changed()
        return self._policy

    def _reload_if_changed(self) -> None:
        stamp = self._stat()
        if stamp == self._stamp:
            return
        try:
            policy = load_policy(self.path)
        except ConfigError as exc:
            log.error("%s; keeping the permissions read before", exc.description)
            return
        self._stamp, self._policy = stamp, policy
        log.info("permissions file %s read again: %d grants", self.path, len(policy.grants))
