"""Where a table is and whether it is there: local paths, log file names, existence, removal,
delta-rs handles with the location's storage options.

sharedsub.core.layout.local_path is the one answer to "is this a local path or a URI" for data
dirs and tables (a path or ``file://`` is local). Local tables are read as files; a table on
object storage through its store (sharedsub.storage.objects.locations) and delta-rs, with the
``[storage] options`` registered for its data dir.
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from sharedsub.core.layout import local_path
from sharedsub.storage.objects import prefetch
from sharedsub.storage.objects.locations import locate, storage_options
from sharedsub.storage.objects.store import ObjectNotFound

if TYPE_CHECKING:
    from deltalake import DeltaTable

# History kept for time travel and replay; the log is cleaned at checkpoints after this.
DEFAULT_TABLE_CONFIG = {
    "delta.logRetentionDuration": "interval 7 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
}


def os_path(path: str) -> str:
    """``path`` as the ``os`` functions take it: its :func:`local_path`, or the URI unchanged for
    other storage (callers that may get a URI check :func:`local_path` first)."""
    local = local_path(path)
    return path if local is None else local


def log_file(table: str, version: int) -> str:
    """Location of the commit file of ``version`` in ``table`` (a path, or a URI)."""
    name = f"_delta_log/{version:020d}.json"
    local = local_path(table)
    return os.path.join(local, name) if local is not None else f"{table.rstrip('/')}/{name}"


def read_object(location: str) -> tuple[bytes, int] | None:
    """A small file's bytes and its modification time in ms (a log entry), local (a read and a
    ``stat``) or on a store (one GET); None when it is not there. A directory under the name
    raises IsADirectoryError, as ``open`` does."""
    local = local_path(location)
    if local is None:
        try:
            got = prefetch.get(location)  # from memory inside a prefetch (objects.prefetch)
        except ObjectNotFound:
            return None
        return got.data, got.meta.modified_ms
    try:
        with open(local, "rb") as fh:
            return fh.read(), int(os.fstat(fh.fileno()).st_mtime * 1000)
    except FileNotFoundError:
        return None


def modified_ms(location: str) -> int | None:
    """When the file at ``location`` was last written, in ms (a ``stat``, or a HEAD on a store);
    None when it is not there."""
    local = local_path(location)
    if local is not None:
        try:
            return int(os.stat(local).st_mtime * 1000)
        except FileNotFoundError:
            return None
    store, key = locate(location)
    try:
        return store.head(key).modified_ms
    except ObjectNotFound:
        return None


def child_names(location: str) -> list[str]:
    """The names directly under ``location`` (a directory, or a key prefix on a store: the first
    segment of every key under it), sorted; empty when there is nothing."""
    local = local_path(location)
    if local is not None:
        try:
            return sorted(os.listdir(local))
        except (FileNotFoundError, NotADirectoryError):
            return []
    store, key = locate(location)
    prefix = f"{key.rstrip('/')}/" if key else ""
    return sorted({m.key[len(prefix) :].split("/", 1)[0] for m in store.list(prefix)})


def data_files(table: str) -> list[str]:
    """Locations of every Parquet file under ``table`` outside its log, whether a version still
    names it or not (what vacuum has not deleted yet)."""
    local = local_path(table)
    if local is None:
        store, key = locate(table)
        base = key.rstrip("/")
        root = table.rstrip("/")
        return [
            f"{root}/{m.key[len(base) + 1 :]}"
            for m in store.list(f"{base}/")
            if m.key.endswith(".parquet") and not m.key[len(base) + 1 :].startswith("_delta_log/")
        ]
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(local):
        dirnames[:] = [d for d in dirnames if d != "_delta_log"]
        found.extend(os.path.join(dirpath, n) for n in filenames if n.endswith(".parquet"))
    return found


def object_exists(location: str) -> bool:
    """Whether a file is at ``location`` (a ``stat``, or a HEAD on a store)."""
    local = local_path(location)
    if local is not None:
        return os.path.isfile(local)
    return prefetch.meta(location) is not None  # (from memory inside a prefetch)


def table_exists(table: str) -> bool:
    """True when ``table`` has a Delta log with at least version 0 (or a checkpoint)."""
    local = local_path(table)
    if local is None:
        store, key = locate(table)
        return any(m.key.endswith((".json", ".parquet")) for m in store.list(f"{key.rstrip('/')}/_delta_log/"))
    log = os.path.join(local, "_delta_log")
    if not os.path.isdir(log):
        return False
    return any(n.endswith(".json") or n.endswith(".parquet") for n in os.listdir(log))


def log_names(table: str) -> list[str]:
    """The file names in ``table``'s ``_delta_log`` (commits, checkpoints, ...), sorted; empty
    when there is no log."""
    local = local_path(table)
    if local is not None:
        log = os.path.join(local, "_delta_log")
        return sorted(os.listdir(log)) if os.path.isdir(log) else []
    store, key = locate(table)
    prefix = f"{key.rstrip('/')}/_delta_log/"
    return [m.key[len(prefix) :] for m in store.list(prefix)]


def log_versions(table: str) -> list[int]:
    """The versions of the JSON commits still in ``table``'s log, ascending (empty: no log)."""
    out = []
    for name in log_names(table):
        stem, _, ext = name.partition(".")
        if ext == "json" and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def remove_table(table: str) -> None:
    """Delete a table and everything under it (no-op when absent)."""
    local = local_path(table)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)
        return
    store, key = locate(table)
    for meta in list(store.list(f"{key.rstrip('/')}/")):
        store.delete(meta.key)


def delta_table(table: str, version: int | None = None) -> DeltaTable:
    """delta-rs's handle of ``table`` (at ``version``), with its storage options.

    Raises:
        TableNotFoundError: there is no table at ``table``.
    """
    from deltalake import DeltaTable

    return DeltaTable(table, version=version, storage_options=storage_options(table))
