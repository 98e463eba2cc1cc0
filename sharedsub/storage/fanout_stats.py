"""The fan-out job's batch statistics, shared with the metrics endpoint through one JSON file.

The job (jobs/fanout.py) calls :meth:`StatsRecorder.record` after each micro-batch that routed
something; it replaces ``<data>/_checkpoints/fanout-stats.json`` atomically (a temporary file in
the same directory, then ``os.replace``), so a reader sees the previous or the new document,
never half of one. :func:`read_stats` is the reader (``sharedsub serve``/``frontend``'s
``/metrics``). Totals count from the start of the job process (a restarted job starts again at
0: Prometheus sees a counter reset).

Document (all times are seconds since the epoch)::

    {"pid": 123, "started_at": t, "batches": 7, "messages": 1000,
     "routed": {"<subscription key>": {"topic": "orders", "rows": 990}},
     "last_batch": {"id": 41, "messages": 100, "routed_rows": 99, "tables": 3,
                    "seconds": 0.25, "finished_at": t},
     "routed_published_at": {"<topic>": t}}

``routed`` counts rows committed to subscription tables (replayed rows a table already held are
not counted); ``routed_published_at`` is, per topic, the newest ``published_at`` of a message the
job has routed, from which the endpoint derives the fan-out lag. Only local data dirs (a path or
``file://``) get the file; elsewhere recording is a no-op.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from sharedsub.model import SubscriptionRecord
from sharedsub.storage import layout

log = logging.getLogger(__name__)


def _local_file(root: str) -> str | None:
    path = layout.fanout_stats_file(root)
    if path.startswith("file://"):
        return path[len("file://") :]
    return None if "://" in path else path


def _newest_published(source: pa.Table) -> dict[str, float]:
    """Newest ``published_at`` per topic of a batch's source rows, as epoch seconds."""
    if source.num_rows == 0 or "published_at" not in source.column_names:
        return {}
    grouped = source.select(["topic", "published_at"]).group_by("topic").aggregate([("published_at", "max")])
    out = {}
    for row in grouped.to_pylist():
        when = row["published_at_max"]
        if when is not None:
            out[str(row["topic"])] = when.timestamp()
    return out


@dataclasses.dataclass(slots=True)
class StatsRecorder:
    """Running totals of one job process, written after each batch (driver thread only)."""

    root: str
    started_at: float = dataclasses.field(default_factory=time.time)
    batches: int = 0
    messages: int = 0
    routed: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    routed_published_at: dict[str, float] = dataclasses.field(default_factory=dict)
    _warned: bool = False

    def record(
        self,
        batch_id: int,
        source: pa.Table,
        written: Mapping[str, int],
        records: Iterable[SubscriptionRecord],
        seconds: float,
    ) -> None:
        """Add one batch: its collected ``source`` rows, ``written`` rows per subscription table
        path (what :meth:`jobs.fanout.FanoutSink.write_routed` returns), the active ``records``
        it routed for, and its duration; then replace the file. Never raises (a failed write is
        logged once)."""
        try:
            by_table = {layout.join(self.root, r.table): r for r in records}
            self.batches += 1
            self.messages += source.num_rows
            for table, rows in written.items():
                rec = by_table.get(table)
                if rec is None:
                    continue
                entry = self.routed.setdefault(rec.key, {"topic": rec.topic, "rows": 0})
                entry["rows"] += int(rows)
            for topic, when in _newest_published(source).items():
                self.routed_published_at[topic] = max(when, self.routed_published_at.get(topic, 0.0))
            self._write(
                {
                    "pid": os.getpid(),
                    "started_at": self.started_at,
                    "batches": self.batches,
                    "messages": self.messages,
                    "routed": self.routed,
                    "last_batch": {
                        "id": batch_id,
                        "messages": source.num_rows,
                        "routed_rows": int(sum(written.values())),
                        "tables": len(written),
                        "seconds": seconds,
                        "finished_at": time.time(),
                    },
                    "routed_published_at": self.routed_published_at,
                }
            )
        except Exception:
            if not self._warned:
                self._warned = True
                log.warning("could not write the fan-out statistics", exc_info=True)

    def _write(self, document: dict[str, Any]) -> None:
        path = _local_file(self.root)
        if path is None:
            return
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".fanout-stats-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(document, fh)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise


def read_stats(root: str) -> dict[str, Any] | None:
    """The last statistics document under ``root`` (None: none written yet, or unreadable)."""
    path = _local_file(root)
    if path is None:
        return None
    try:
        with open(path) as fh:
            document = json.load(fh)
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None

