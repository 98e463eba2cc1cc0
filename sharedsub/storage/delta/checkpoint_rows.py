"""The rows of a Delta checkpoint made from the previous checkpoint and the log entries after it,
without reading the table again. I/O-free: callers hand in what they hold or fetched.

Why: delta-rs's ``create_checkpoint`` loads the table and replays its log segment, and on a
bucket that is every entry since the previous checkpoint read two to four times (261 GETs at
version 100 behind a 20 ms store: the stalls of publish→delivery at 200 msg/s, bench/RESULTS.md
"what a checkpoint reads on a bucket"). The one writer of a table holds the entries it committed
and the ones it stepped over (sharedsub.storage.delta.object_append), so the next checkpoint is
the previous one with those entries applied.

Contract of :func:`next_checkpoint`: the rows delta-rs's ``create_checkpoint`` writes for the same
version (tests/storage/test_checkpoint_rows.py compares them), in the same column layout
(sharedsub.storage.delta.object_checkpoint.checkpoint_schema, learnt from delta-rs once per
process):

* one ``protocol`` and one ``metaData`` row, the newest of each;
* one ``txn`` row per app id, its newest version;
* one ``add`` row per active file, in delta-rs's file order: the newest entry's adds first, each
  entry's adds in the order it lists them, then the previous checkpoint's adds in their row order
  (the order sharedsub.storage.delta.log_snapshot relies on);
* one ``remove`` row (a tombstone, for vacuum) per file whose last action is a remove within the
  table's ``delta.deletedFileRetentionDuration`` (7 days when unset), as delta-rs keeps them.

What it does not write raises :class:`CannotCheckpoint` (the caller asks delta-rs): deletion
vectors, domain metadata, reader/writer features, a previous checkpoint of another layout (one
written by Spark), entries missing between the previous checkpoint and the version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_DAY_MS = 86_400_000
_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": _DAY_MS, "week": 7 * _DAY_MS}
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+([a-z]+?)s?\s*$", re.IGNORECASE)
DEFAULT_TOMBSTONE_RETENTION_MS = 7 * _DAY_MS
"""Delta's default ``delta.deletedFileRetentionDuration`` (one week)."""


class CannotCheckpoint(Exception):
    """The log holds something this module does not write into a checkpoint: ask delta-rs."""


def retention_ms(configuration: Mapping[str, str] | None) -> int:
    """How long tombstones stay in checkpoints: the table's ``delta.deletedFileRetentionDuration``
    (``interval <n> <unit>``), else one week."""
    text = (configuration or {}).get("delta.deletedFileRetentionDuration")
    match = _INTERVAL.match(text) if text else None
    if match is None or match.group(2).lower() not in _UNITS_MS:
        return DEFAULT_TOMBSTONE_RETENTION_MS
    return int(match.group(1)) * _UNITS_MS[match.group(2).lower()]


def _configuration(metadata: Mapping[str, Any]) -> dict[str, str]:  # Any: json.loads or to_pylist output
    """A metaData action's configuration, from JSON (a dict) or a checkpoint row (key/value pairs)."""
    conf = metadata.get("configuration") or {}
    if isinstance(conf, Mapping):
        return {str(k): str(v) for k, v in conf.items()}
    return {str(k): str(v) for k, v in conf}


def _checked(action: Mapping[str, object], version: int) -> None:
    """Raise CannotCheckpoint for an action this module does not carry into a checkpoint."""
    if "domainMetadata" in action or "sidecar" in action or "checkpointMetadata" in action:
        raise CannotCheckpoint(f"version {version}: {next(iter(action))} actions")
    for kind in ("add", "remove"):
        body = action.get(kind)
        if isinstance(body, Mapping) and body.get("deletionVector"):
            raise CannotCheckpoint(f"version {version}: a deletion vector")
    protocol = action.get("protocol")
    if isinstance(protocol, Mapping) and (protocol.get("readerFeatures") or protocol.get("writerFeatures")):
        raise CannotCheckpoint(f"version {version}: table features")


def next_checkpoint(
    previous: pa.Table | None,
    entries: Sequence[tuple[int, str]],
    *,
    now_ms: int,
    schema: pa.Schema,
) -> pa.Table:
    """The checkpoint at the last of ``entries``: ``previous`` (the checkpoint just before the
    first entry, in ``schema``'s layout; None when the entries start at version 0)
    with ``entries`` = ``(version, log entry text)``, consecutive and ascending, applied (see the
    module docstring). ``now_ms`` dates tombstones' expiry; ``schema``: the layout delta-rs
    writes (object_checkpoint.checkpoint_schema).

    Raises:
        CannotCheckpoint: see the module docstring.
    """
    parsed = _parsed(previous, entries, schema)
    protocol, metadata, txns = _newest(parsed)
    if metadata is not None:
        conf = _configuration(metadata)
    elif previous is not None:
        rows = previous.column("metaData").drop_null().to_pylist()
        conf = _configuration(rows[0]) if rows else {}
    else:
        raise CannotCheckpoint("no metaData action")
    oldest_tombstone = now_ms - retention_ms(conf)
    rows_out, decided = _file_rows(parsed, oldest_tombstone)
    rows_out.extend({"txn": txn} for txn in txns.values())
    if protocol is not None:
        rows_out.append({"protocol": protocol})
    if metadata is not None:
        rows_out.append({"metaData": metadata})
    fresh = pa.Table.from_pylist([_row(r, schema) for r in rows_out], schema=schema)
    if previous is None:
        if protocol is None:
            raise CannotCheckpoint("no protocol action")
        return fresh
    return pa.concat_tables([fresh, _kept(previous, decided, txns, protocol, metadata, oldest_tombstone)])


_Action = dict[str, Any]  # Any: json.loads gives a Delta action's nested values untyped


def _parsed(previous: pa.Table | None, entries: Sequence[tuple[int, str]], schema: pa.Schema) -> list[list[_Action]]:
    """The actions of each entry, checked (next_checkpoint's Raises)."""
    if not entries:
        raise CannotCheckpoint("no log entries after the previous checkpoint")
    versions = [v for v, _ in entries]
    if versions != list(range(versions[0], versions[0] + len(versions))):
        raise CannotCheckpoint(f"log entries not consecutive: {versions[0]}..{versions[-1]}")
    if previous is None and versions[0] != 0:
        raise CannotCheckpoint(f"no previous checkpoint and the entries start at version {versions[0]}")
    if previous is not None and not previous.schema.equals(schema, check_metadata=False):
        raise CannotCheckpoint("the previous checkpoint has another column layout")
    parsed: list[list[_Action]] = []
    for version, text in entries:
        actions = [json.loads(line) for line in text.splitlines() if line.strip()]
        for action in actions:
            _checked(action, version)
        parsed.append(actions)
    return parsed


def _newest(parsed: Sequence[Sequence[_Action]]) -> tuple[_Action | None, _Action | None, dict[str, _Action]]:
    """The newest protocol and metaData the entries hold, and their newest txn per app id."""
    protocol: _Action | None = None
    metadata: _Action | None = None
    txns: dict[str, _Action] = {}
    for actions in parsed:  # oldest first: the newest of each wins
        for action in actions:
            if "protocol" in action:
                protocol = action["protocol"]
            elif "metaData" in action:
                metadata = action["metaData"]
            elif "txn" in action:
                txns[str(action["txn"]["appId"])] = action["txn"]
    return protocol, metadata, txns


def _file_rows(parsed: Sequence[Sequence[_Action]], oldest_tombstone: int) -> tuple[list[_Action], set[str]]:
    """The add and remove rows the entries leave, newest entry first, and every path they touch.
    A path's newest action decides: an add re-added or removed later is gone, and so is the
    tombstone of a path added again later."""
    rows: list[_Action] = []
    decided: set[str] = set()
    for actions in reversed(parsed):
        added = [a["add"] for a in actions if "add" in a]
        removed = [a["remove"] for a in actions if "remove" in a]
        rows.extend({"add": add} for add in added if str(add["path"]) not in decided)
        for remove in removed:
            stamp = remove.get("deletionTimestamp")
            if str(remove["path"]) not in decided and (stamp is None or int(stamp) >= oldest_tombstone):
                rows.append({"remove": remove})
        decided.update(str(a["path"]) for a in added)
        decided.update(str(r["path"]) for r in removed)
    return rows, decided


def _row(action: Mapping[str, object], schema: pa.Schema) -> dict[str, object]:
    """A checkpoint row with one action column set (the others null)."""
    return {name: action.get(name) for name in schema.names}


def _kept(
    previous: pa.Table,
    decided: set[str],
    txns: Mapping[str, object],
    protocol: object,
    metadata: object,
    oldest_tombstone: int,
) -> pa.Table:
    """The previous checkpoint's rows still true after the entries: its adds and tombstones of
    paths no entry touched (unexpired), the txn of app ids no entry recorded, protocol and
    metaData unless an entry changed them."""
    touched = pa.array(sorted(decided), pa.string())
    add_path = pc.struct_field(previous.column("add"), "path")
    remove = previous.column("remove")
    remove_path = pc.struct_field(remove, "path")
    remove_stamp = pc.struct_field(remove, "deletionTimestamp")
    txn_app = pc.struct_field(previous.column("txn"), "appId")
    keep_add = pc.and_kleene(pc.is_valid(previous.column("add")), pc.invert(pc.is_in(add_path, touched)))
    keep_remove = pc.and_kleene(
        pc.is_valid(remove),
        pc.and_kleene(
            pc.invert(pc.is_in(remove_path, touched)),
            pc.or_kleene(pc.is_null(remove_stamp), pc.greater_equal(remove_stamp, pa.scalar(oldest_tombstone, pa.int64()))),
        ),
    )
    keep_txn = pc.and_kleene(
        pc.is_valid(previous.column("txn")), pc.invert(pc.is_in(txn_app, pa.array(sorted(txns), pa.string())))
    )
    keep = pc.or_kleene(pc.or_kleene(keep_add, keep_remove), keep_txn)
    if protocol is None:
        keep = pc.or_kleene(keep, pc.is_valid(previous.column("protocol")))
    if metadata is None:
        keep = pc.or_kleene(keep, pc.is_valid(previous.column("metaData")))
    return previous.filter(pc.fill_null(keep, False))


def last_checkpoint(version: int, table: pa.Table, size_in_bytes: int) -> bytes:
    """The ``_last_checkpoint`` file naming the checkpoint ``table`` at ``version`` (the fields
    delta-rs writes)."""
    adds = int(pc.sum(pc.is_valid(table.column("add"))).as_py() or 0)
    body = {"version": version, "size": table.num_rows, "sizeInBytes": size_in_bytes, "numOfAddFiles": adds}
    return json.dumps(body, separators=(",", ":")).encode()
