"""Opt-in memory profile of a running serve: tracemalloc snapshots and native counters.

Off unless ``SHAREDSUB_TRACEMALLOC_DIR`` names a directory. Then serve starts tracemalloc
(``SHAREDSUB_TRACEMALLOC_FRAMES`` frames per traceback, default 8) and a daemon thread that,
every ``SHAREDSUB_TRACEMALLOC_INTERVAL`` seconds (default 120), writes ``snap-<n>.tracemalloc``
(load with ``tracemalloc.Snapshot.load``) and appends one JSON line to ``memory.jsonl``: the
process RSS, the Python heap tracemalloc sees, pyarrow's pool and glibc's heap counters. RSS
growing while the traced heap stays flat points at native memory (delta-rs, Arrow, malloc).
With ``SHAREDSUB_TRACEMALLOC_FRAMES=0`` tracemalloc stays off (it slows serve several-fold):
only the counters lines are written.

For diagnosis (bench/soak.py runs with it through ``--serve-env``); tracemalloc slows serve.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
import tracemalloc
from collections.abc import Mapping

ENV_DIR = "SHAREDSUB_TRACEMALLOC_DIR"
ENV_INTERVAL = "SHAREDSUB_TRACEMALLOC_INTERVAL"
ENV_FRAMES = "SHAREDSUB_TRACEMALLOC_FRAMES"


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
    )]


def _malloc_counters() -> dict[str, int]:
    """The glibc heap: bytes in use (``uordblks`` + mmapped ``hblkhd``) and free but kept (``fordblks``)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    return {"malloc_in_use": info.uordblks + info.hblkhd, "malloc_free_kept": info.fordblks,
            "malloc_arena": info.arena}


def _rss() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return None


def sample() -> dict[str, object]:
    """One line of counters: RSS, traced Python heap (when tracing), Arrow pool, glibc heap."""
    line: dict[str, object] = {"t": round(time.time(), 1), "rss": _rss()}
    if tracemalloc.is_tracing():
        line["traced"], line["traced_peak"] = tracemalloc.get_traced_memory()
    try:
        import pyarrow

        line["arrow_allocated"] = pyarrow.total_allocated_bytes()
    except ImportError:
        pass
    line.update(_malloc_counters())
    return line


class MemoryProfiler(threading.Thread):
    """Writes a snapshot and a counters line to ``directory`` every ``interval`` seconds."""

    def __init__(self, directory: str, interval: float) -> None:
        super().__init__(name="sharedsub-memprofile", daemon=True)
        self.directory, self.interval = directory, interval
        self._stop_event = threading.Event()
        self.written = 0

    def take(self) -> None:
        """Write one snapshot and its counters line now."""
        line = sample()
        if tracemalloc.is_tracing():
            path = os.path.join(self.directory, f"snap-{self.written:03d}.tracemalloc")
            tracemalloc.take_snapshot().dump(path)
            line["snapshot"] = os.path.basename(path)
        with open(os.path.join(self.directory, "memory.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        self.written += 1

    def run(self) -> None:
        """The thread: :meth:`take` every interval; a write that fails is logged, the next one is tried."""
        while not self._stop_event.wait(self.interval):
            try:
                self.take()
            except OSError as exc:
                logging.getLogger("sharedsub").warning("memory profile: %s", exc)

    def stop(self) -> None:
        """Ask the thread to end: no snapshot is taken after this (one under way finishes)."""
        self._stop_event.set()


def start_from_env(environ: Mapping[str, str]) -> MemoryProfiler | None:
    """Start tracemalloc and the profiler when ``SHAREDSUB_TRACEMALLOC_DIR`` is set; else None."""
    directory = environ.get(ENV_DIR)
    if not directory:
        return None
    os.makedirs(directory, exist_ok=True)
    frames = int(environ.get(ENV_FRAMES, "8"))
    if frames > 0:
        tracemalloc.start(frames)
    profiler = MemoryProfiler(directory, float(environ.get(ENV_INTERVAL, "120")))
    profiler.start()
    logging.getLogger("sharedsub").info("memory profile: snapshots to %s", directory)
    return profiler
