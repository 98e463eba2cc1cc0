"""The one rule on proton's objects: only the reactor thread touches them, and releases them.

Proton-C is not thread-safe, and python-qpid-proton's wrappers count references into it: a
wrapper released on another thread runs ``pn_decref`` there, racing the loop (seen as heap
corruption under load; connectors/amqp/tokens.py). Work that crosses threads therefore carries
ints and plain values, never a proton object; what they stand for stays on the reactor thread
(``tokens.Tokens``, connectors/amqp/cluster_port.py).

This module is also the check of that rule, a debug mode: :func:`install` wraps every ``pn_*``
function of ``cproton`` (the C API every proton wrapper and connectors/amqp/wire call through,
rebinding the names modules already imported), and each call from a thread other than the one
:func:`bind` named — the engine loop's, from the moment it runs — is a **violation**: logged
with its stack, and written as a report file into the directory the check was installed with,
so that whoever ran the process (the test suite, tests/conftest.py) can fail on it. A violation
is reported, not raised: it may happen in ``__del__`` or in a garbage collection, where raising
is lost, and the process goes on as it would without the check. Before :func:`bind` (while the
service is being built) any thread may call.

``sharedsub serve`` and ``frontend`` install it when ``SHAREDSUB_PROTON_THREAD_CHECK`` names a
directory (sharedsub/serve.py); off otherwise (no cost: nothing is wrapped). Each checked call
costs a thread-id comparison in a Python frame: a debug mode, not for production.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import cproton
import proton

log = logging.getLogger(__name__)

_WRAPPERS = (proton.Connection, proton.Session, proton.Link, proton.Delivery, proton.Transport)
"""The proton objects that count references into Proton-C (released by ``pn_decref``)."""

ENV = "SHAREDSUB_PROTON_THREAD_CHECK"
"""The environment variable that turns the check on: a directory for the reports."""

REPORT_PREFIX = "proton-thread-"
"""Report files are ``<dir>/proton-thread-<pid>-<n>.txt``."""


class _Check:
    """The installed check's state (one per process)."""

    def __init__(self, reports: str) -> None:
        self.reports = reports
        self.owner: int | None = None  # the reactor thread's ident once bound
        self.owner_name = ""
        self.seen: set[tuple[str, str]] = set()  # (function, thread name) already reported
        self.count = 0
        self.lock = threading.Lock()

    def violation(self, function: str) -> None:
        """Report ``function`` called on this thread (never raises)."""
        try:
            thread = threading.current_thread().name
            with self.lock:
                if (function, thread) in self.seen:
                    return
                self.seen.add((function, thread))
                self.count += 1
                n = self.count
            stack = "".join(traceback.format_stack()[:-2])
            text = (
                f"proton call {function} on thread {thread!r}, not the reactor's ({self.owner_name!r}); "
                f"pid {os.getpid()}\n{stack}"
            )
            path = os.path.join(self.reports, f"{REPORT_PREFIX}{os.getpid()}-{n}.txt")
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            log.error("%s", text)
        except Exception:  # noqa: BLE001 (a report that cannot be written must not end the caller, maybe a __del__)
            pass


_check: _Check | None = None


# Any: cproton's functions are untyped (cffi builtins and plain Python functions)
def _guarded(check: _Check, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    get_ident = threading.get_ident

    @functools.wraps(fn)
    def checked(*args: Any) -> Any:  # Any: as fn's
        owner = check.owner
        if owner is not None and get_ident() != owner:
            check.violation(name)
        return fn(*args)

    return checked


def _modules() -> Iterable[Any]:  # Any: module objects (types.ModuleType has no typed attributes)
    """The loaded modules that may hold cproton's functions under names of their own."""
    for name, module in list(sys.modules.items()):
        if module is None:
            continue
        if name == "cproton" or name.startswith(("proton", "connectors.amqp")):
            yield module


def install(reports: str) -> None:
    """Turn the check on for this process, reports into the directory ``reports`` (created if
    missing). A second call does nothing."""
    global _check
    if _check is not None:
        return
    os.makedirs(reports, exist_ok=True)
    check = _Check(reports)
    # By identity: modules hold them under names of their own (connectors/amqp/wire/outgoing.py).
    replaced = {
        id(fn): (fn, _guarded(check, name, fn))
        for name, fn in vars(cproton).items()
        if name.startswith("pn_") and callable(fn)
    }
    for module in _modules():
        for attr, value in list(vars(module).items()):
            found = replaced.get(id(value))
            if found is not None and found[0] is value:
                setattr(module, attr, found[1])
    _check = check
    log.info("proton thread check on (%s): reports go to %s", ENV, reports)


def install_from_env(environ: Mapping[str, str]) -> None:
    """:func:`install` when ``environ`` names a report directory in :data:`ENV`."""
    reports = environ.get(ENV, "")
    if reports:
        install(reports)


def bind() -> None:
    """The calling thread is the reactor's from now on (the engine loop calls this as it starts
    running); nothing when the check is off."""
    if _check is not None:
        _check.owner = threading.get_ident()
        _check.owner_name = threading.current_thread().name


def violations() -> int:
    """How many distinct violations this process reported (0 when the check is off)."""
    return 0 if _check is None else _check.count


def holds_proton(value: object, depth: int = 4) -> bool:
    """Whether ``value`` carries a proton object where work handed to another thread would take
    it along: itself, a closure's cells, a partial's arguments, a bound method's object (when it
    is one), the items of a tuple, list, set or dict, to ``depth`` levels. Objects of other kinds
    are not looked into (a front end's own object is released on its own thread)."""
    if isinstance(value, _WRAPPERS):
        return True
    if depth <= 0:
        return False
    inner: list[object] = []
    if isinstance(value, functools.partial):
        inner = [value.func, *value.args, *value.keywords.values()]
    elif hasattr(value, "__closure__") and hasattr(value, "__code__"):
        cells = getattr(value, "__closure__", None) or ()
        inner = [c.cell_contents for c in cells if _filled(c)]
        inner.extend(getattr(value, "__defaults__", None) or ())
    elif hasattr(value, "__self__") and hasattr(value, "__func__"):
        inner = [value.__self__]
    elif isinstance(value, (tuple, list, set, frozenset)):
        inner = list(value)
    elif isinstance(value, dict):
        inner = [*value.keys(), *value.values()]
    return any(holds_proton(v, depth - 1) for v in inner)


def _filled(cell: Any) -> bool:  # Any: a closure cell (types.CellType)
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def handed_off(work: object, what: str) -> None:
    """With the check on, report ``work`` (a callable about to go to another thread, ``what``
    says where) when it carries a proton object (:func:`holds_proton`): found where it is
    handed over, every time, rather than only when the other thread happens to release it."""
    check = _check
    if check is not None and holds_proton(work):
        check.violation(f"hand-off of a proton object to {what}")
