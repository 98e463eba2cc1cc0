"""The subscription catalog: a Delta table of append-only subscription revisions.

The current state of a subscription is its row with the highest ``revision``. The front end is
the catalog's only writer; the fan-out job and the CLI read it. ``CatalogReader`` keeps the
current state in memory and applies only new commits on each refresh.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionRecord
from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import latest_version, read_commit
from sharedsub.storage.delta.table_reads import iter_rows, read_files, read_table
from sharedsub.storage.delta.tables import log_file


def append_records(
    appender: DeltaAppender, records: Iterable[SubscriptionRecord], *, commit_id: str | None = None
) -> int:
    """Commit ``records`` to the catalog in one commit; return the catalog version.

    ``commit_id``: the same for every try of the same records (appender.DeltaAppender.append)."""
    rows = [r.to_row() for r in records]
    return appender.append(pa.Table.from_pylist(rows, schema=schemas.CATALOG), commit_id=commit_id)


def catalog_appender(root: str, *, fsync: bool = False, epoch: int | None = None) -> DeltaAppender:
    """Appender for the catalog table under ``root`` (``fsync``: see appender.sync_commit;
    ``epoch``: the owner epoch its commits carry, see DeltaAppender)."""
    # evolve: catalogs made before the ``owner`` column existed get it with their next commit.
    return DeltaAppender(layout.catalog_table(root), schemas.CATALOG, fsync=fsync, evolve=True, epoch=epoch)


def keep_latest(records: dict[str, SubscriptionRecord], data: pa.Table | None) -> dict[str, SubscriptionRecord]:
    """Take the catalog rows of ``data`` into ``records`` (by key): a key's row of the highest
    revision wins, a later row of the same revision too. Returns ``records``."""
    for row in iter_rows(data):
        rec = SubscriptionRecord.from_row(row)
        cur = records.get(rec.key)
        if cur is None or rec.revision >= cur.revision:
            records[rec.key] = rec
    return records


class CatalogReader:
    """Current catalog state, refreshed incrementally from the Delta log."""

    def __init__(self, root: str) -> None:
        self.path = layout.catalog_table(root)
        self._version = -1
        self._records: dict[str, SubscriptionRecord] = {}

    @property
    def version(self) -> int:
        """Catalog version this state reflects (-1 before the first commit)."""
        return self._version

    def refresh(self) -> dict[str, SubscriptionRecord]:
        """Apply commits made since the last refresh; return every record by key."""
        if self._version < 0:
            latest = latest_version(self.path)
            if latest < 0:
                return self._records
            self._apply(read_table(self.path, version=latest))
            self._version = latest
            return self._records
        while True:
            commit = read_commit(self.path, self._version + 1)
            if commit is None:
                break
            self._apply(read_files(commit.added))
            self._version = commit.version
        return self._records

    def _apply(self, data: pa.Table | None) -> None:
        keep_latest(self._records, data)

    def next_entry(self) -> str | None:
        """The log entry the next :meth:`refresh` reads first (None: it loads the table), for a
        caller that prefetches it with its own reads (sharedsub.storage.objects.prefetch)."""
        return log_file(self.path, self._version + 1) if self._version >= 0 else None

    def active(self) -> list[SubscriptionRecord]:
        """Active records after a refresh, ordered by key."""
        return sorted((r for r in self.refresh().values() if r.active), key=lambda r: r.key)


def load_catalog(root: str) -> dict[str, SubscriptionRecord]:
    """Every subscription's current record (deleted ones included), by key."""
    return CatalogReader(root).refresh()


# Any: rows of the links table as pyarrow's to_pylist() gives them (iter_rows)
def attached_links(root: str) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """Consumer links whose last event is ``attached``, by (key, link, container, connection)."""
    data = read_table(layout.join(root, layout.LINKS_TABLE))
    last: dict[tuple[str, str, str, str], dict[str, Any]] = {}  # Any: as above
    for row in iter_rows(data):
        ident = (row["key"], row["link"], row["container"], row["connection"])
        cur = last.get(ident)
        if cur is None or row["at"] >= cur["at"]:
            last[ident] = row
    return {k: v for k, v in last.items() if v["event"] == "attached"}
