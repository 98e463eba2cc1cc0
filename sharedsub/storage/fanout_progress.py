"""The fan-out's progress record on the data dir's store (sharedsub.core.ops.fanout_progress
says what it holds and when it is written).

The job writes it for a data dir on object storage (:func:`write_progress`); maintenance reads it
(:func:`read_progress`, through sharedsub.storage.retention.read_fanout_progress). A local data
dir's fan-out checkpoint is in the data dir, and maintenance reads that instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from sharedsub.core import layout
from sharedsub.core.ops import fanout_progress
from sharedsub.core.ops.retention import FanoutProgress
from sharedsub.storage.delta.tables import read_object
from sharedsub.storage.objects.locations import locate


def write_progress(root: str, versions: Mapping[str, int], ids: Mapping[str, str], *, batch: int, at_ms: int) -> None:
    """Replace the record of the data dir ``root`` (one PUT).

    Raises:
        OSError: the store did not take it (StoreFailure is one).
    """
    store, key = locate(layout.fanout_progress(root))
    store.put(key, fanout_progress.encode(versions, ids, batch=batch, at_ms=at_ms))


def read_progress(root: str) -> FanoutProgress:
    """What the record says; ``FanoutProgress()`` (nothing known) when there is none.

    Raises:
        ValueError: the object is not a record (nothing may be trimmed on its word).
        OSError: the store did not answer.
    """
    got = read_object(layout.fanout_progress(root))
    if got is None:
        return FanoutProgress()
    return fanout_progress.decode(got[0])
