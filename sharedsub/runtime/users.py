"""The users file: who may authenticate, with SCRAM credentials only (no password is stored).

Format (JSON, written by ``sharedsub users add|remove``, owner-only: mode 0600)::

    {
      "format": 1,
      "users": {
        "alice": {
          "SCRAM-SHA-256": "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>",
          "SCRAM-SHA-512": "SCRAM-SHA-512$4096:<salt>$<StoredKey>:<ServerKey>"
        }
      }
    }

Each value is :meth:`sharedsub.core.security.scram.Credential.to_text` (base64 fields). PLAIN is checked against
the SHA-256 credential (sharedsub.core.security.sasl_rules). The path is ``[security] users_file``, by default
``<data_dir>/_users.json``.

``parse_users``/``render_users``/``add_user``/``remove_user`` are pure; ``load_users``,
``save_users`` and :class:`UserStore` read and write the file.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Mapping

from sharedsub.core import layout
from sharedsub.core.errors import ConfigError, InvalidUser, UserExists, UserNotFound
from sharedsub.core.layout import USERS_FILE
from sharedsub.core.security import scram
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.owner_only import ensure_data_dir

log = logging.getLogger(__name__)

FORMAT = 1
DEFAULT_FILE = USERS_FILE
"""The users file under the data dir when ``[security] users_file`` is empty."""

UsersTable = dict[str, dict[str, scram.Credential]]
"""user name -> SCRAM mechanism -> credential."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")


def is_valid_user_name(name: str) -> bool:
    """Names are ASCII letters, digits and ``._@-`` (no SCRAM escaping, no surprises in logs), at
    most 128 characters, starting with a letter or digit."""
    return bool(_NAME.match(name))


def users_path(data_dir: str, users_file: str) -> str:
    """Where the users file is: ``users_file`` when set, else ``<data_dir>/_users.json``."""
    return users_file or layout.join(data_dir, DEFAULT_FILE)


def parse_users(text: str, *, source: str = "users file") -> UsersTable:
    """The users of a users file's text.

    Raises:
        ConfigError: not JSON, another format, a bad user name or credential (key ``security.users_file``).
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigError("security.users_file", f"{source} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("users"), dict):
        raise ConfigError("security.users_file", f'{source} is not a sharedsub users file (format {FORMAT}, "users")')
    users: UsersTable = {}
    for name, creds in doc["users"].items():
        if not is_valid_user_name(name) or not isinstance(creds, dict):
            raise ConfigError("security.users_file", f"{source}: bad entry for user {name!r}")
        users[name] = {}
        for mech, text_cred in creds.items():
            try:
                cred = scram.Credential.from_text(str(text_cred))
            except ValueError as exc:
                raise ConfigError("security.users_file", f"{source}: user {name!r}: {exc}") from None
            if cred.mechanism != mech or mech not in scram.STORED:
                raise ConfigError("security.users_file", f"{source}: user {name!r}: {mech} holds a {cred.mechanism} credential")
            users[name][mech] = cred
    return users


def render_users(users: Mapping[str, Mapping[str, scram.Credential]]) -> str:
    """The users file text of ``users`` (sorted; ends with a newline)."""
    doc = {
        "format": FORMAT,
        "users": {name: {m: c.to_text() for m, c in sorted(users[name].items())} for name in sorted(users)},
    }
    return json.dumps(doc, indent=2) + "\n"


def add_user(users: Mapping[str, Mapping[str, scram.Credential]], name: str, password: str,
             iterations: int = scram.DEFAULT_ITERATIONS) -> UsersTable:
    """``users`` plus ``name`` with credentials for every stored mechanism.

    Raises:
        InvalidUser: a bad name, or an empty password.
        UserExists: ``name`` is there already.
    """
    if not is_valid_user_name(name):
        raise InvalidUser(f"invalid user name {name!r}: use [A-Za-z0-9][A-Za-z0-9._@-]*, at most 128 characters")
    if not password:
        raise InvalidUser("the password must not be empty")
    if name in users:
        raise UserExists(name)
    out = {n: dict(c) for n, c in users.items()}
    out[name] = {m: scram.derive(password, m, iterations) for m in scram.STORED}
    return out


def remove_user(users: Mapping[str, Mapping[str, scram.Credential]], name: str) -> UsersTable:
    """``users`` without ``name``.

    Raises:
        UserNotFound: ``name`` is not there.
    """
    if name not in users:
        raise UserNotFound(name)
    return {n: dict(c) for n, c in users.items() if n != name}


def load_users(path: str) -> UsersTable:
    """The users in ``path`` (none when the file does not exist).

    Raises:
        ConfigError: the file cannot be read or is not a users file.
    """
    try:
        if layout.local_path(path) is None:  # on the data dir's object store
            store, key = locate(path)
            text = store.get(key).data.decode("utf-8")
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("security.users_file", f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_users(text, source=path)


def save_users(path: str, users: Mapping[str, Mapping[str, scram.Credential]]) -> None:
    """Replace ``path`` with ``users``: written to a temporary file created with mode 0600 in the
    same directory, synced, then renamed over it (readers see the old or the new file whole).
    On object storage: one PUT (atomic there; the bucket's access rules protect it)."""
    if layout.local_path(path) is None:
        store, key = locate(path)
        store.put(key, render_users(users).encode("utf-8"))
        return
    directory = os.path.dirname(os.path.abspath(path))
    ensure_data_dir(directory)  # 0700 when this creates it (usually the data dir)
    fd, tmp = tempfile.mkstemp(prefix=".users-", dir=directory)  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(render_users(users))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class UserStore:
    """The users file as the listener reads it: :meth:`lookup` re-reads the file when its size,
    mtime or inode changed, so ``sharedsub users add|remove`` take effect without a restart.
    A file that became unreadable or invalid is logged and the last good users are kept."""

    def __init__(self, path: str) -> None:
        """Read ``path`` (none there: no users).

        Raises:
            ConfigError: the file cannot be read or is not a users file (a service must not start
                open to anonymous clients because its users file is broken).
        """
        self.path = path
        self._stamp: tuple[int, int, int] | str | None = None
        self._users: UsersTable = load_users(path)
        self._remote = layout.local_path(path) is None
        if self._remote:
            self._stamp = self._tag()
            return
        try:
            st = os.stat(path)
            self._stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            pass

    def _tag(self) -> str | None:
        store, key = locate(self.path)
        try:
            return store.head(key).etag
        except FileNotFoundError:
            return None

    def _refresh_remote(self) -> None:
        try:
            tag = self._tag()
        except OSError as exc:  # the store did not answer: keep the users read before
            log.warning("cannot read the users file %s: %s", self.path, exc)
            return
        if tag == self._stamp:
            return
        try:
            users = load_users(self.path) if tag is not None else {}
        except ConfigError as exc:
            log.error("%s; keeping the %d users read before", exc.description, len(self._users))
            return
        self._stamp, self._users = tag, users

    def refresh(self) -> None:
        """Read the file again if it changed."""
        if self._remote:
            self._refresh_remote()
            return
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._users = None, {}
            return
        except OSError as exc:
            log.warning("cannot stat the users file %s: %s", self.path, exc.strerror)
            return
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self._stamp:
            return
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("the users file %s can be read by others (mode %o); it should be 0600",
                        self.path, stat.S_IMODE(st.st_mode))
        try:
            users = load_users(self.path)
        except ConfigError as exc:
            log.error("%s; keeping the %d users read before", exc.description, len(self._users))
            return
        self._stamp, self._users = stamp, users

    @property
    def names(self) -> list[str]:
        """The user names (as last read)."""
        return sorted(self._users)

    def lookup(self, name: str) -> Mapping[str, scram.Credential]:
        """``name``'s credentials by mechanism (empty when unknown); re-reads a changed file."""
        self.refresh()
        return self._users.get(name, {})
