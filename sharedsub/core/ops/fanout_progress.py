"""The fan-out's progress record: what retention needs of the fan-out, kept on the store. Pure.

On a data dir on object storage the fan-out's Spark checkpoint is a local directory of the
driver's host (sharedsub.core.layout.fanout_checkpoint_dir), which the front end that runs
maintenance may not see. So the job writes a small JSON record, ``<data>/_fanout/progress.json``
(sharedsub.storage.fanout_progress does the I/O), between micro-batches:

    {"versions": {"<topic>": 17}, "ids": {"<topic>": "<delta table id>"},
     "batch": 41, "at_ms": 1764230000000}

``versions``/``ids`` are the end offset of the query's last completed micro-batch (every row of
those topic versions is in the subscription tables, or parked); ``at_ms`` is when the record was
made, at a moment no batch was in the job's hands: every batch routed after it reads the catalog
after ``at_ms`` (sharedsub.core.ops.retention.FanoutProgress.writes_follow).

A stale record is safe: it claims less routed than there is (retention keeps more) and an older
``at_ms`` (ended non-durable tables wait longer). So it is written at most every
:data:`MIN_INTERVAL` seconds when the versions moved, and every :data:`HEARTBEAT` seconds when
they did not (``at_ms`` moves on for an idle fan-out): a few PUTs a minute, not one per batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from sharedsub.core.ops.retention import FanoutProgress

MIN_INTERVAL = 5.0
HEARTBEAT = 15.0


def due(*, changed: bool, since_last: float | None) -> bool:
    """Whether to write the record now: never written (``since_last`` None), the versions
    ``changed`` since the last write and :data:`MIN_INTERVAL` passed, or :data:`HEARTBEAT` passed.

    =========  ===========  ======
    changed    since_last   due
    =========  ===========  ======
    any        None         yes
    yes        < 5 s        no
    yes        >= 5 s       yes
    no         < 15 s       no
    no         >= 15 s      yes
    =========  ===========  ======
    """
    if since_last is None:
        return True
    return since_last >= (MIN_INTERVAL if changed else HEARTBEAT)


def encode(versions: Mapping[str, int], ids: Mapping[str, str], *, batch: int, at_ms: int) -> bytes:
    """The record's bytes (JSON, keys sorted)."""
    document = {"versions": dict(versions), "ids": dict(ids), "batch": batch, "at_ms": at_ms}
    return json.dumps(document, sort_keys=True).encode()


def decode(data: bytes) -> FanoutProgress:
    """The progress a record states.

    Raises:
        ValueError: not a record (not JSON, or a field of the wrong type).
    """
    try:
        document = json.loads(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"the fan-out progress record is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("the fan-out progress record is not a JSON object")
    try:
        versions = {str(k): int(v) for k, v in dict(document.get("versions") or {}).items()}
        ids = {str(k): str(v) for k, v in dict(document.get("ids") or {}).items()}
        at_ms = int(document["at_ms"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the fan-out progress record is malformed: {exc}") from exc
    return FanoutProgress(versions, ids, planned_ms=None, found=True, as_of_ms=at_ms)
