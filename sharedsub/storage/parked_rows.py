"""The fan-out's routed rows that could not be committed yet, on disk until their table takes them.

:class:`ParkedRows` is the store the fan-out sink (jobs/fanout_sink.py) parks a failing
subscription table's rows in, and retries them from (the rule: sharedsub.core.fanout.fanout_faults).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from sharedsub.core import layout
from sharedsub.core.layout import local_path
from sharedsub.storage import schemas
from sharedsub.storage.durable_files import fsync_path, makedirs_synced


class ParkedRows:
    """Routed rows of subscription tables whose commits failed, kept on disk until the table takes
    them (local data dirs only).

    One Parquet file per (table, batch): ``<data>/_fanout/pending/<table rel>/<first seq>-<batch
    id>.parquet`` (both numbers zero-padded to 20 digits), schema ``schemas.SUBSCRIPTION``, rows
    in ``seq`` order. A file is written under a temporary name, fsynced, renamed and its directory
    fsynced (and every directory created for it): after :meth:`park` returns, the rows survive a
    crash or power loss; a file is whole or absent. Named by first seq, the files of a table sort
    in seq order; a file holds every row of its table in its seq range, so reading them in name
    order and keeping rows above the highest seq taken so far yields each row once, in order,
    even when a replayed batch parked the same rows again.
    """

    def __init__(self, root: str) -> None:
        self.base: str | None = local_path(layout.fanout_pending(root))

    def _dir(self, rel: str) -> str:
        if self.base is None:
            raise OSError(f"rows can only be parked under a local data dir, not {layout.FANOUT_PENDING!r} here")
        return os.path.join(self.base, *rel.split("/"))

    def scan(self) -> dict[str, tuple[int, float]]:
        """``{table rel: (rows, modification time of its oldest file)}`` of everything parked;
        leftover temporary files of an interrupted :meth:`park` are removed."""
        found: dict[str, tuple[int, float]] = {}
        if self.base is None or not os.path.isdir(self.base):
            return found
        for dirpath, _dirs, names in os.walk(self.base):
            rows, oldest = 0, float("inf")
            for name in names:
                path = os.path.join(dirpath, name)
                if name.startswith("."):
                    os.unlink(path)  # a park that did not complete; its batch was not reported done
                elif name.endswith(".parquet"):
                    rows += pq.read_metadata(path).num_rows
                    oldest = min(oldest, os.stat(path).st_mtime)
            if oldest != float("inf"):
                found[os.path.relpath(dirpath, self.base).replace(os.sep, "/")] = (rows, oldest)
        return found

    def files(self, rel: str) -> list[str]:
        """The parked files of table ``rel``, in seq order (none: [])."""
        directory = self._dir(rel)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        return [os.path.join(directory, n) for n in sorted(names) if n.endswith(".parquet") and not n.startswith(".")]

    def park(self, rel: str, rows: pa.Table, batch_id: int) -> None:
        """Store ``rows`` (of table ``rel``, seq order) durably; raises OSError when it cannot."""
        directory = self._dir(rel)
        makedirs_synced(directory)
        first = int(rows.column("seq")[0].as_py())
        name = f"{first:020d}-{batch_id:020d}.parquet"
        tmp = os.path.join(directory, f".{name}.tmp")
        try:
            pq.write_table(rows.cast(schemas.SUBSCRIPTION), tmp)
            fsync_path(tmp)
            os.replace(tmp, os.path.join(directory, name))
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        fsync_path(directory, directory=True)

    @staticmethod
    def read(path: str) -> pa.Table:
        """The rows of one parked file."""
        return pq.read_table(path).cast(schemas.SUBSCRIPTION)

    def remove(self, rel: str, files: Sequence[str] | None = None) -> None:
        """Delete ``files`` (default: all) of table ``rel``, and its directories once empty."""
        for path in self.files(rel) if files is None else files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        directory = self._dir(rel)
        assert self.base is not None
        while directory != self.base and os.path.isdir(directory) and not os.listdir(directory):
            os.rmdir(directory)
            directory = os.path.dirname(directory)
