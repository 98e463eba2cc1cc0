"""How far the fan-out query has routed each topic: into the statistics file, and for retention.

:class:`RoutedProgress` takes the routed versions of the query's last completed micro-batch from
its progress report (``StreamingQuery.lastProgress``: the end offset, per topic, of the
``sharedsub_topics`` source), sets them as the statistics' ``routed_versions``
(sharedsub.storage.fanout_stats), and, on a data dir on object storage, writes the progress
record retention reads (sharedsub.core.ops.fanout_progress: when it is due;
sharedsub.storage.fanout_progress: the write). Called between batches, with no batch in the
job's hands (the fan-out sink's lock, jobs/fanout_sink.py), so the record's ``at_ms`` is such a
moment. A failed write of the record is logged (throttled) and retried at the next call.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from jobs.sources.deltars_topics import offset_ids, offset_versions
from sharedsub.core import layout
from sharedsub.core.ops import fanout_progress
from sharedsub.core.ops.logthrottle import ThrottledLog
from sharedsub.storage.fanout_progress import write_progress
from sharedsub.storage.fanout_stats import StatsRecorder

log = logging.getLogger("sharedsub.fanout")


class RoutedProgress:
    """The routed versions of one fan-out query over the data dir ``root`` (module docstring)."""

    def __init__(self, root: str, stats: StatsRecorder) -> None:
        self.root = root
        self.stats = stats
        self._last_progress: int | None = None  # the batch id of the last progress report taken
        self._routed_ids: dict[str, str] = {}
        # On object storage the job keeps a progress record for retention (sharedsub.core.ops.fanout_progress):
        # when it was last written (monotonic) and whether the versions moved since.
        self._record_progress = layout.local_path(root) is None
        self._progress_written: float | None = None
        self._progress_moved = False
        self._faults = ThrottledLog(log)

    def update(self, progress: dict[str, Any] | None) -> bool:  # Any: lastProgress's JSON values (see FanoutQuery)
        """Take the routed versions from ``progress`` (None: no report yet) and write the
        progress record when due; True when the versions changed. Raises what reading the
        report raises but a malformed report (ignored) and a failed write (logged)."""
        changed = self._note_progress(progress)
        self._progress_moved = self._progress_moved or changed
        if self._record_progress:
            self._write_progress_record()
        return changed

    def _note_progress(self, progress: dict[str, Any] | None) -> bool:  # Any: as update
        """Take the routed versions from a progress report; True when they changed."""
        if progress is None:
            return False
        try:
            batch = int(progress["batchId"])
            end = progress["sources"][0]["endOffset"]
            versions = offset_versions(json.loads(end) if isinstance(end, str) else end)
        except (KeyError, IndexError, TypeError, ValueError):
            return False
        if versions == self.stats.routed_versions and batch == self._last_progress:
            return False
        self._last_progress = batch
        self.stats.routed_versions = versions
        self._routed_ids = offset_ids(json.loads(end) if isinstance(end, str) else end)
        return True

    def _write_progress_record(self) -> None:
        """Write the progress record when due (sharedsub.core.ops.fanout_progress.due). Nothing
        before the first completed batch. A failed write is logged (throttled) and retried."""
        versions, batch = self.stats.routed_versions, self._last_progress
        if versions is None or batch is None:
            return
        now = time.monotonic()
        since = None if self._progress_written is None else now - self._progress_written
        if not fanout_progress.due(changed=self._progress_moved, since_last=since):
            return
        try:
            write_progress(self.root, versions, self._routed_ids, batch=batch, at_ms=int(time.time() * 1000))
        except OSError as exc:
            self._faults.fault("progress", "could not write the fan-out progress record", error=exc)
            return
        self._faults.clear("progress", "the fan-out progress record is written again")
        self._progress_written = now
        self._progress_moved = False
