"""Where a table is and whether it is there: local paths, log file names, existence, removal.

sharedsub.core.layout.local_path is the one answer to "is this a local path or a URI" for data
dirs and tables (a path or ``file://`` is local). Nothing here imports deltalake.
"""

from __future__ import annotations

import os
import shutil

from sharedsub.core.layout import local_path

# History kept for time travel and replay; the log is cleaned at checkpoints after this.
DEFAULT_TABLE_CONFIG = {
    "delta.logRetentionDuration": "interval 7 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
}


def os_path(path: str) -> str:
    """``path`` as the ``os`` functions take it: its :func:`local_path`, or the URI unchanged for
    other storage (where they find nothing: no table exists there for :func:`table_exists`)."""
    local = local_path(path)
    return path if local is None else local


def log_file(table: str, version: int) -> str:
    """Path of the commit file of ``version`` in ``table``."""
    return os.path.join(os_path(table), "_delta_log", f"{version:020d}.json")


def table_exists(table: str) -> bool:
    """True when ``table`` has a Delta log with at least version 0 (or a checkpoint)."""
    log = os.path.join(os_path(table), "_delta_log")
    if not os.path.isdir(log):
        return False
    return any(n.endswith(".json") or n.endswith(".parquet") for n in os.listdir(log))


def remove_table(table: str) -> None:
    """Delete a local table directory and everything in it (no-op when absent)."""
    shutil.rmtree(os_path(table), ignore_errors=True)
