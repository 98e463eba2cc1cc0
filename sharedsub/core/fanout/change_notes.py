"""Change notes: how the fan-out learns of new topic commits on object storage without probing
every topic table every interval. Pure.

On a bucket each probe of a topic's log is a billed request 10-30 ms away, so probing every
topic at every trigger makes an idle service's cost grow with its topics (DESIGN §9: "change is
announced, not polled per table"). Instead each writer of topic tables (a front end's
committer, one per member slot) keeps one small object, its *note*
(``<data>/_changes/topics-<slot>.json``, sharedsub.storage.change_notes does the I/O)::

    {"writer": "<uuid of this committer run>", "epoch": 3, "seq": 17,
     "feeds": {"orders": 17, "prices~p1": 12}}

``feeds`` maps each topic table (a *feed*, named as its directory under ``topics/``) to the
note ``seq`` at which it was last noted. The fan-out's source (jobs/sources/deltars_topics.py)
reads the notes once per probe and probes only the feeds that are *active*. The fan-out job
keeps one too (:data:`FANOUT_NOTE`), naming the subscription tables it wrote, for the tailers of
front ends that get no announcements from it (``sharedsub frontend``): the same rules, with
the tailer's back-off doubling from its poll interval after a note names a table (so it
probes again after R, then more and more seldom).

Writer rule (:class:`NoteKeeper`): after a commit of feed ``f`` at time ``t``, the note is
written (before the committer's next group) when ``f`` was never noted by this writer or its
last note is more than :data:`RENOTE_AFTER` (R) seconds older than ``t``. A note written names
every feed committed since its own last note, so feeds that commit steadily are noted together:
one PUT per R per member under steady traffic, and one per group commit at most.

Reader rule (:class:`ChangeWatch`): a feed is active from the moment a note read shows it
noted (or a sweep names it) until a probe that *started* at least :data:`ACTIVE_FOR` (Q > R)
seconds after the feed was last activated or found to have new commits found nothing new.
Active feeds are probed at every probe; the others are not probed at all.

Why nothing is missed: take a commit of ``f`` at ``t1``. If it was noted, the note read after
its PUT activates ``f`` and the probe that follows finds it. If not, ``f`` was noted at some
``t0`` with ``t1 - t0 <= R``; the reader read that note at ``ta >= t0`` and activated ``f``
then, so ``f`` stays active at least until a probe that starts at ``ta + Q > t1 + (Q - R)``,
which comes after the commit and finds it. (Intervals are measured on each side's own
monotonic clock; only their lengths are compared.) A writer that dies between a commit and its
note is followed by another run of the writer (a restart, or a takeover of its slot), whose
first note names a different ``writer``: the reader then *sweeps*, probing every feed once. It
sweeps too when a note appears, at its own start, and every ``sweep_interval`` as a safety net.

    event (reader)                                   feeds probed from then on
    -----------------------------------------------  --------------------------------------
    first read of a note, or another ``writer``      every feed once (a sweep)
    same writer, feed noted at a seq > last read     that feed, active
    probe found new commits (or some are held)       that feed stays active
    probe found nothing, started >= Q after it       that feed goes quiet (not probed)
      was last activated or found new
    sweep (start, a note appears, safety interval)   every feed once
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Mapping

RENOTE_AFTER = 1.0
"""R: a feed committed more than this many seconds after its last note is noted again."""

ACTIVE_FOR = 3.0
"""Q: a feed stays active until a probe started this many seconds after its last news finds
nothing (must exceed :data:`RENOTE_AFTER` by more than a probe's interval)."""

SWEEP_INTERVAL = 3600.0
"""Seconds between two safety sweeps of every feed (each feed probed once)."""

NOTE_LIST_INTERVAL = 10.0
"""Seconds between two listings of the notes (a new member's note is found within this)."""

NOTE_PREFIX = "topics-"
"""Every topic writer's note is ``<NOTE_PREFIX><slot>.json`` under the changes directory."""


FANOUT_NOTE = "fanout.json"
"""The fan-out job's note: the subscription tables its batches wrote (paths relative to the
data dir), read by the tailers of ``sharedsub frontend`` members, which get no announcements."""


def note_name(slot: int) -> str:
    """The name of member slot ``slot``'s note (sharedsub.core.layout.changes_dir holds it)."""
    return f"{NOTE_PREFIX}{slot}.json"


@dataclasses.dataclass(frozen=True)
class Note:
    """One writer's note (see the module docstring)."""

    writer: str
    epoch: int
    seq: int
    feeds: Mapping[str, int]


def encode(note: Note) -> bytes:
    """The note's JSON bytes."""
    return json.dumps(
        {"writer": note.writer, "epoch": note.epoch, "seq": note.seq, "feeds": dict(note.feeds)},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()


def decode(data: bytes) -> Note:
    """The note in ``data``.

    Raises:
        ValueError: ``data`` is not a note.
    """
    try:
        raw = json.loads(data)
        feeds = {str(k): int(v) for k, v in dict(raw["feeds"]).items()}
        return Note(str(raw["writer"]), int(raw["epoch"]), int(raw["seq"]), feeds)
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a change note: {exc}") from exc


class NoteKeeper:
    """The writer's side: which commits need a note, and the next note (see the module docstring).

    One per committer run (its ``writer`` id is new each run). Not thread-safe: the committer's
    thread only.
    """

    def __init__(self, epoch: int, *, renote_after: float = RENOTE_AFTER, writer: str | None = None) -> None:
        self.writer = writer if writer is not None else uuid.uuid4().hex
        self.epoch = epoch
        self._renote_after = renote_after
        self._seq = 0
        self._feeds: dict[str, int] = {}
        self._noted_at: dict[str, float] = {}  # feed -> when the last note naming it was made
        self._pending: set[str] = set()  # feeds committed since their last note
        self._due = True  # a run's first note (with no feed) tells readers a new writer runs

    @property
    def due(self) -> bool:
        """Whether a note should be written now."""
        return self._due

    def committed(self, feeds: Iterable[str], now: float) -> None:
        """``feeds`` got a commit at ``now`` (after it was durable).

        ======================  =====================================  ===========
        feed noted by this run  now - its last note                    note due
        ======================  =====================================  ===========
        never                   -                                      yes
        yes                     > renote_after                         yes
        yes                     <= renote_after                        no (pending)
        ======================  =====================================  ===========
        """
        for feed in feeds:
            self._pending.add(feed)
            noted = self._noted_at.get(feed)
            if noted is None or now - noted > self._renote_after:
                self._due = True

    def note(self) -> Note:
        """The note to write: every pending feed at the next seq (nothing changes until
        :meth:`written`)."""
        seq = self._seq + 1
        feeds = dict(self._feeds)
        feeds.update((feed, seq) for feed in self._pending)
        return Note(self.writer, self.epoch, seq, feeds)

    def written(self, note: Note, made_at: float) -> None:
        """``note`` (from :meth:`note`, made at ``made_at``: before its PUT started) is stored."""
        self._seq = note.seq
        self._feeds = dict(note.feeds)
        for feed, seq in note.feeds.items():
            if seq == note.seq:
                self._noted_at[feed] = made_at
                self._pending.discard(feed)
        self._due = False


@dataclasses.dataclass
class NoteNews:
    """What one read of the notes says: sweep every feed, or activate ``feeds``."""

    sweep: bool = False
    feeds: set[str] = dataclasses.field(default_factory=set)


class ChangeWatch:
    """The reader's side: which feeds to probe (see the module docstring). Not thread-safe."""

    def __init__(self, *, active_for: float = ACTIVE_FOR, sweep_interval: float = SWEEP_INTERVAL) -> None:
        self._active_for = active_for
        self._sweep_interval = sweep_interval
        self._seen: dict[str, tuple[str, int]] = {}  # note name -> (writer, seq) last read
        self._news_at: dict[str, float] = {}  # active feed -> when last activated or found new
        self._swept_at: float | None = None

    def read(self, notes: Mapping[str, Note | None], now: float) -> NoteNews:
        """Take the notes just read (name -> note; None: not there) and activate what they name.

        =====================================  =============================================
        note                                   news
        =====================================  =============================================
        not there (None)                       nothing (forgotten: its return is a new note)
        first read, or another ``writer``      sweep
        same writer, seq below the last read   sweep (it cannot go back: be safe)
        same writer                            feeds noted at a seq above the last read
        =====================================  =============================================
        """
        news = NoteNews()
        for name, note in notes.items():
            seen = self._seen.get(name)
            if note is None:
                self._seen.pop(name, None)
                continue
            if seen is None or seen[0] != note.writer or note.seq < seen[1]:
                news.sweep = True
            else:
                news.feeds.update(feed for feed, seq in note.feeds.items() if seq > seen[1])
            self._seen[name] = (note.writer, note.seq)
        for feed in news.feeds:
            self._news_at[feed] = now
        return news

    def sweep_due(self, now: float) -> bool:
        """Whether the safety sweep is due (never swept yet, or ``sweep_interval`` passed)."""
        return self._swept_at is None or now - self._swept_at >= self._sweep_interval

    def sweep(self, feeds: Iterable[str], now: float) -> None:
        """Probe every one of ``feeds`` once (an active feed stays as it is)."""
        self._swept_at = now
        for feed in feeds:
            # As if its news were Q old: the next probe that finds nothing ends it.
            self._news_at.setdefault(feed, now - self._active_for)

    def active(self) -> set[str]:
        """The feeds the next probe probes."""
        return set(self._news_at)

    def probed(self, feed: str, *, news: bool, started: float) -> None:
        """A probe of ``feed`` that started at ``started`` found new commits (or holds some:
        ``news``) or nothing; a feed found nothing Q after its last news goes quiet."""
        last = self._news_at.get(feed)
        if news:
            self._news_at[feed] = started if last is None else max(last, started)
        elif last is not None and started >= last + self._active_for:
            del self._news_at[feed]
