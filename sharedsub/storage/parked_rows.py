"""The fan-out's routed rows that could not be committed yet, kept until their table takes them.

:class:`ParkedRows` is the store the fan-out sink (jobs/parking.py) parks a failing
subscription table's rows in, and retries them from (the rule: sharedsub.core.fanout.fanout_faults).
It writes through the data dir's object store (sharedsub.storage.objects): files on a local dir
(fsynced), objects on S3 (durable once the PUT is answered).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from sharedsub.core import layout
from sharedsub.core.layout import local_path
from sharedsub.storage import schemas
from sharedsub.storage.objects.local_store import LocalStore
from sharedsub.storage.objects.locations import locate
from sharedsub.storage.objects.store import ObjectStore


class ParkedRows:
    """Routed rows of subscription tables whose commits failed, kept until the table takes them.

    One Parquet object per (table, batch): ``<data>/_fanout/pending/<table rel>/<first seq>-<batch
    id>.parquet`` (both numbers zero-padded to 20 digits), schema ``schemas.SUBSCRIPTION``, rows
    in ``seq`` order. Each is one atomic, durable put (sharedsub.storage.objects.store): after
    :meth:`park` returns, the rows survive a crash or power loss; an object is whole or absent.
    Named by first seq, the objects of a table sort in seq order; one holds every row of its
    table in its seq range, so reading them in name order and keeping rows above the highest seq
    taken so far yields each row once, in order, even when a replayed batch parked the same rows
    again. :meth:`files` names them by key (what :meth:`read` and :meth:`remove` take).
    """

    def __init__(self, root: str) -> None:
        pending = layout.fanout_pending(root)
        local = local_path(pending)
        self._store: ObjectStore
        if local is not None:
            self._store, self._prefix = LocalStore(local), ""
        else:
            self._store, key = locate(pending)
            self._prefix = key.rstrip("/") + "/"

    def _dir(self, rel: str) -> str:
        return f"{self._prefix}{rel.strip('/')}/"

    def scan(self) -> dict[str, tuple[int, float]]:
        """``{table rel: (rows, modification time of its oldest object, s since the epoch)}`` of
        everything parked."""
        found: dict[str, tuple[int, float]] = {}
        for meta in self._store.list(self._prefix):
            rel, _, name = meta.key[len(self._prefix) :].rpartition("/")
            if not rel or not name.endswith(".parquet") or name.startswith("."):
                continue
            rows = pq.read_metadata(pa.BufferReader(self._store.get(meta.key).data)).num_rows
            before = found.get(rel, (0, float("inf")))
            found[rel] = (before[0] + rows, min(before[1], meta.modified_ms / 1000))
        return found

    def files(self, rel: str) -> list[str]:
        """The parked objects of table ``rel``, in seq order (none: [])."""
        directory = self._dir(rel)
        return sorted(
            m.key for m in self._store.list(directory)
            if "/" not in m.key[len(directory) :] and m.key.endswith(".parquet") and not m.key[len(directory) :].startswith(".")
        )

    def park(self, rel: str, rows: pa.Table, batch_id: int) -> None:
        """Store ``rows`` (of table ``rel``, seq order) durably; raises OSError when it cannot."""
        first = int(rows.column("seq")[0].as_py())
        buffer = io.BytesIO()
        pq.write_table(rows.cast(schemas.SUBSCRIPTION), buffer)
        self._store.put(f"{self._dir(rel)}{first:020d}-{batch_id:020d}.parquet", buffer.getvalue())

    def read(self, key: str) -> pa.Table:
        """The rows of one parked object (a key :meth:`files` gave)."""
        return pq.read_table(pa.BufferReader(self._store.get(key).data)).cast(schemas.SUBSCRIPTION)

    def remove(self, rel: str, files: Sequence[str] | None = None) -> None:
        """Delete ``files`` (default: all) of table ``rel``."""
        for key in self.files(rel) if files is None else files:
            self._store.delete(key)

    def first_seqs(self, rel: str) -> list[int]:
        """The first seq of each file parked for table ``rel`` (from the object names)."""
        return [
            int(name.split("-", 1)[0])
            for name in (k.rsplit("/", 1)[-1] for k in self.files(rel))
            if name.split("-", 1)[0].isdigit()
        ]
