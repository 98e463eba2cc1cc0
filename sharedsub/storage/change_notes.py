"""The change notes' I/O on a data dir's store (sharedsub.core.fanout.change_notes says what a
note holds, who writes it and when it is read).

Notes live under ``<data>/_changes/`` (sharedsub.core.layout.changes_dir), one object each: a
PUT replaces one, a GET reads one (served from memory inside an objects.prefetch block), a LIST
of the directory finds them. Only data dirs on object storage have notes: a local data dir's
probes are ``stat`` calls, which cost no request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from sharedsub.core import layout
from sharedsub.core.fanout import change_notes
from sharedsub.core.fanout.change_notes import Note, NoteKeeper
from sharedsub.storage.delta.tables import read_object
from sharedsub.storage.objects.locations import locate

log = logging.getLogger("sharedsub.storage.change_notes")


def note_location(root: str, name: str) -> str:
    """Where the note ``name`` of the data dir ``root`` is."""
    return layout.join(layout.changes_dir(root), name)


def write_note(root: str, name: str, note: Note) -> None:
    """Replace the note ``name`` (one PUT).

    Raises:
        OSError: the store did not take it (StoreFailure is one).
    """
    store, key = locate(note_location(root, name))
    store.put(key, change_notes.encode(note))


def list_notes(root: str) -> list[str]:
    """The names of the topic writers' notes there are (one LIST).

    Raises:
        OSError: the store did not answer.
    """
    store, key = locate(layout.changes_dir(root))
    prefix = key.rstrip("/") + "/"
    names = (meta.key[len(prefix) :] for meta in store.list(prefix + change_notes.NOTE_PREFIX))
    return sorted(name for name in names if "/" not in name)


def read_notes(root: str, names: Iterable[str]) -> dict[str, Note | None]:
    """Each note named (None: not there, or not a note: logged). One GET each, or none inside
    an objects.prefetch block that holds them.

    Raises:
        OSError: the store did not answer.
    """
    notes: dict[str, Note | None] = {}
    for name in names:
        got = read_object(note_location(root, name))
        if got is None:
            notes[name] = None
            continue
        try:
            notes[name] = change_notes.decode(got[0])
        except ValueError as exc:
            log.warning("change note %s is unreadable (%s): read as absent", name, exc)
            notes[name] = None
    return notes


class NoteWriter:
    """One writer's note on the store: what its NoteKeeper says is due, stored by :meth:`flush`.
    A failure is logged (the first, then every 100th) and the note stays due for the next
    flush: readers miss nothing meanwhile that their next sweep does not find. One thread."""

    def __init__(self, root: str, name: str, keeper: NoteKeeper) -> None:
        self.root = root
        self.name = name
        self.keeper = keeper
        self._failures = 0

    @property
    def due(self) -> bool:
        """Whether a note waits to be stored."""
        return self.keeper.due

    def committed(self, feeds: Iterable[str]) -> None:
        """``feeds`` (topic feeds, or subscription tables relative to the data dir) got a commit just now."""
        self.keeper.committed(feeds, time.monotonic())

    def flush(self) -> None:
        """Store the note when one is due (one PUT)."""
        if not self.keeper.due:
            return
        note, made_at = self.keeper.note(), time.monotonic()
        try:
            write_note(self.root, self.name, note)
        except Exception as exc:  # noqa: BLE001 (a note is a hint: it never fails a commit)
            self._failures += 1
            if self._failures % 100 == 1:
                log.warning("change note %s not stored (%d tries so far): %s", self.name, self._failures, exc)
            return
        if self._failures:
            log.info("change note %s stored again after %d failed tries", self.name, self._failures)
            self._failures = 0
        self.keeper.written(note, made_at)


class NotesInBackground:
    """A :class:`NoteWriter` whose notes are stored by a thread of its own: the caller (the
    fan-out's micro-batch) hands over what it committed and goes on, instead of waiting for the
    note's PUT (a round trip per batch on the message's path: the next batch started after it).
    A note is a hint (NoteWriter): one not yet stored when the process ends is found by the
    readers' next sweep. A note that failed is tried again every ``retry`` seconds."""

    def __init__(self, writer: NoteWriter, *, retry: float = 1.0) -> None:
        self._writer = writer
        self._retry = retry
        self._lock = threading.Lock()  # NoteWriter is one thread's: committed and flush take turns
        self._wake = threading.Event()
        threading.Thread(target=self._run, name="sharedsub-change-note", daemon=True).start()

    def committed(self, feeds: Iterable[str]) -> None:
        """``feeds`` got a commit just now: their note is stored soon, on the thread."""
        with self._lock:
            self._writer.committed(feeds)
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._retry if self._writer.due else None)
            self._wake.clear()
            with self._lock:
                self._writer.flush()
