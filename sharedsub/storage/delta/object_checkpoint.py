"""A checkpoint of a table written by its writer from what it holds (on object storage, or on a
local directory through sharedsub.storage.objects.local_store): one GET of
``_last_checkpoint``, one GET of the checkpoint it names, the GETs of log entries after it the
writer does not hold (none when it wrote or stepped over them all), then the checkpoint's PUT
and ``_last_checkpoint``'s PUT, as delta-rs writes them (sharedsub.storage.delta.checkpoint_rows
makes the rows).

Why: delta-rs's ``create_checkpoint`` re-reads the whole log segment, each entry two to four
times (bench/RESULTS.md "what a checkpoint reads on a bucket"); those reads, every ten seconds on
a busy topic, stalled the requests of the message path beside them.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from sharedsub.storage.delta.checkpoint_rows import CannotCheckpoint, last_checkpoint, next_checkpoint
from sharedsub.storage.objects.store import ObjectNotFound, ObjectStore

MAX_FETCHED_ENTRIES = 200
"""Log entries a checkpoint GETs itself at most (more: delta-rs writes it)."""


def _log_key(table_key: str, name: str) -> str:
    """The key of ``name`` in the log of the table at ``table_key`` ("" for a store rooted at the table)."""
    return "/".join(part for part in (table_key.strip("/"), "_delta_log", name) if part)


_schema: pa.Schema | None = None
_schema_lock = threading.Lock()


def checkpoint_schema() -> pa.Schema:
    """The column layout of delta-rs's classic checkpoints, learnt once per process from a
    checkpoint it writes of a scratch table (so what is written here is what it writes)."""
    global _schema
    with _schema_lock:
        if _schema is None:
            scratch = tempfile.mkdtemp(prefix="sharedsub-checkpoint-")
            try:
                write_deltalake(scratch, pa.table({"seq": pa.array([0], pa.int64())}), mode="append")
                DeltaTable(scratch).create_checkpoint()
                _schema = pq.read_schema(f"{scratch}/_delta_log/{0:020d}.checkpoint.parquet")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return _schema


def previous_checkpoint(store: ObjectStore, table_key: str) -> int | None:
    """The version ``_last_checkpoint`` names (None: there is none).

    Raises:
        CannotCheckpoint: it names a multi-part or v2 checkpoint, or cannot be read.
    """
    try:
        body = json.loads(store.get(_log_key(table_key, "_last_checkpoint")).data)
    except ObjectNotFound:
        return None
    except ValueError as exc:
        raise CannotCheckpoint(f"_last_checkpoint: {exc}") from None
    if not isinstance(body, dict) or "version" not in body or body.get("parts") or body.get("v2Checkpoint"):
        raise CannotCheckpoint(f"_last_checkpoint names no single-file checkpoint: {body!r}")
    return int(body["version"])


def write_checkpoint(store: ObjectStore, table_key: str, version: int, held: Mapping[int, str]) -> bool:
    """Write the checkpoint of the table at ``table_key`` at ``version`` (see the module
    docstring); ``held``: log entry texts by version the writer holds. False when a checkpoint
    at ``version`` or later is there already (nothing written).

    Raises:
        CannotCheckpoint: the log holds what checkpoint_rows does not write, or too many entries
            are missing here (the caller asks delta-rs).
        StoreFailure: the store did not answer (no ``_last_checkpoint`` names a partial checkpoint).
    """
    start = previous_checkpoint(store, table_key)
    if start is not None and start >= version:
        return False
    first = 0 if start is None else start + 1
    missing = [v for v in range(first, version + 1) if v not in held]
    if len(missing) > MAX_FETCHED_ENTRIES:
        raise CannotCheckpoint(f"{len(missing)} log entries before version {version} are not held")
    entries: list[tuple[int, str]] = []
    for v in range(first, version + 1):
        text = held.get(v)
        if text is None:
            try:
                text = store.get(_log_key(table_key, f"{v:020d}.json")).data.decode("utf-8")
            except ObjectNotFound:
                raise CannotCheckpoint(f"log entry {v} is gone") from None
        entries.append((v, text))
    previous: pa.Table | None = None
    if start is not None:
        try:
            data = store.get(_log_key(table_key, f"{start:020d}.checkpoint.parquet")).data
        except ObjectNotFound:
            raise CannotCheckpoint(f"checkpoint {start} named by _last_checkpoint is gone") from None
        previous = pq.read_table(pa.BufferReader(data))
    table = next_checkpoint(previous, entries, now_ms=int(time.time() * 1000), schema=checkpoint_schema())
    sink = io.BytesIO()
    pq.write_table(table, sink)
    body = sink.getvalue()
    store.put(_log_key(table_key, f"{version:020d}.checkpoint.parquet"), body)
    store.put(_log_key(table_key, "_last_checkpoint"), last_checkpoint(version, table, len(body)))
    return True
