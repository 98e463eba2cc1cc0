"""Owner-only files: the data dir and what the service writes into it.

The data dir holds every message, the users file's SCRAM keys and the running service's admin
token (``_service.json``), so nothing in it is meant for other users of the machine:

* :func:`owner_only_umask` is the umask the ``sharedsub`` command runs with (``main`` sets it):
  the process's own umask with the group and other bits added, so every file and directory the
  service, the fan-out child it starts (it inherits the umask) and the CLI create is 0600/0700
  at most, whatever library creates it (delta-rs, Spark, Parquet writers).
* :func:`ensure_data_dir` creates a local data dir 0700 (explicitly, not only through the umask)
  and reports an existing one that group or others may enter (``serve`` logs it; the mode of a
  dir someone else set up is left alone).
"""

from __future__ import annotations

import os
import stat

from sharedsub.core.layout import local_path

OWNER_ONLY = 0o077  # bits every umask of the sharedsub command includes
DIR_MODE = 0o700


def owner_only_umask() -> int:
    """Add the group and other bits to the process umask; return the previous umask."""
    previous = os.umask(OWNER_ONLY)
    os.umask(previous | OWNER_ONLY)
    return previous


def ensure_data_dir(root: str) -> bool:
    """Create the local data dir ``root`` (and missing parents) if it is not there; the data dir
    itself gets mode 0700. Return True when it was created. Other storage: nothing, False."""
    path = local_path(root)
    if path is None or os.path.isdir(path):
        return False
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return False  # created meanwhile by someone else: theirs to set
    os.chmod(path, DIR_MODE)  # mkdir's mode went through the umask; 0700 whatever it was
    return True


def open_to_others(root: str) -> int | None:
    """The permission bits of an existing local data dir when group or others have any access
    to it (e.g. 0o755), else None."""
    path = local_path(root)
    if path is None:
        return None
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    return mode if mode & 0o077 else None
