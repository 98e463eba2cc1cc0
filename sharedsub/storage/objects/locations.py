"""Which store a table location is on, with which settings.

Tables and files are named by location strings throughout (``s3://lake/ssdata/topics/orders``,
``/var/lib/sharedsub/topics/orders``). A data dir on object storage may come with ``[storage]
options`` (endpoint, credentials, ...) that every request under it needs, the service's own and
delta-rs's. Entry points (``serve``, ``frontend``, the CLI, the fan-out job) call
:func:`register` once with the data dir and its options, as they read their configuration; the
storage code then finds the store and the options of any location under it with
:func:`locate` and :func:`storage_options`. A location under no registered root gets a store
with no options (the AWS variables alone), so a notebook reading a table by URI works too.

The registrations reach child processes (the append child, the fan-out job, Spark's Python
workers that run the fan-out's data source) through the environment: :func:`register` also
writes them to ``_SHAREDSUB_STORAGE_REGISTRY`` (JSON; not a ``SHAREDSUB_<SECTION>_<KEY>`` setting),
which a process reads on its first lookup.
A process's environment is readable by its user only (``/proc/PID/environ`` is 0400).

Local locations (a path or ``file://``) are never registered: the local code paths read them
directly (their fast paths: one ``stat`` per probe, ``link(2)`` commits, fsync).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping

from sharedsub.core import layout
from sharedsub.storage.objects import open_store
from sharedsub.storage.objects.store import ObjectStore

ENV = "_SHAREDSUB_STORAGE_REGISTRY"

_lock = threading.Lock()
_inherited = False  # whether ENV was read (once, at the first lookup)
_options: dict[str, dict[str, str]] = {}  # registered root (no trailing /) -> [storage] options
_stores: dict[tuple[str, str | None], ObjectStore] = {}  # (bucket, registered root) -> its store


def register(root: str, options: Mapping[str, str] | None) -> None:
    """Locations under the data dir ``root`` use ``options`` (no-op for a local ``root``)."""
    if layout.local_path(root) is not None:
        return
    with _lock:
        _inherit()
        _options[root.rstrip("/")] = dict(options or {})
        _stores.pop((_bucket_of(root), root.rstrip("/")), None)
        os.environ[ENV] = json.dumps(_options)  # for the child processes started from now on


def _inherit() -> None:
    """Take the registrations a parent process passed in the environment (under ``_lock``)."""
    global _inherited
    if _inherited:
        return
    _inherited = True
    for root, options in json.loads(os.environ.get(ENV) or "{}").items():
        _options.setdefault(str(root), {str(k): str(v) for k, v in options.items()})


def _bucket_of(location: str) -> str:
    scheme, rest = location.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"


def _root_of(location: str) -> str | None:
    """The longest registered root that ``location`` is under."""
    best = None
    for root in _options:
        if (location == root or location.startswith(root + "/")) and (best is None or len(root) > len(best)):
            best = root
    return best


# delta-rs's HTTP client bounds on object storage, unless [storage] options name others. Its own
# defaults retry a request for up to 3 minutes (measured: a commit against a SIGSTOPped versitygw
# raised after 180 s), which would hide a store outage from the committer's fault handling
# (sharedsub.core.publish.write_faults) far past the owner lease's deadline. With these, an
# unreachable store is reported within seconds, a hung one within timeout + retry_timeout.
DELTA_CLIENT_BOUNDS = {"connect_timeout": "5s", "timeout": "20s", "retry_timeout": "10s"}


def storage_options(location: str) -> dict[str, str] | None:
    """The ``[storage] options`` for ``location`` as delta-rs takes them, over
    :data:`DELTA_CLIENT_BOUNDS` (None: a local location). delta-rs reads the AWS variables for
    what they do not name."""
    if layout.local_path(location) is not None:
        return None
    with _lock:
        _inherit()
        root = _root_of(location)
        given = _options[root] if root is not None else {}
        named = {key.lower().removeprefix("aws_") for key in given}
        return {**{k: v for k, v in DELTA_CLIENT_BOUNDS.items() if k not in named}, **given}


def locate(location: str) -> tuple[ObjectStore, str]:
    """The store ``location`` is on (one per bucket and settings) and its key there.

    Raises:
        ValueError: a local location (its code path reads files), or an unsupported scheme.
    """
    if layout.local_path(location) is not None:
        raise ValueError(f"{location} is local: read it as a file")
    bucket = _bucket_of(location)
    with _lock:
        _inherit()
        root = _root_of(location)
        options = _options.get(root, {}) if root is not None else {}
        store = _stores.get((bucket, root))
        if store is None:
            store = _stores[(bucket, root)] = open_store(bucket, options)
    return store, location[len(bucket) :].lstrip("/")
