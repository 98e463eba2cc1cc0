"""The change notes' rules (sharedsub.core.fanout.change_notes), as tables: when a writer notes a
commit, what a read of the notes activates, when a feed goes quiet, and the bound that makes a
commit never missed."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.change_notes import (
    ACTIVE_FOR,
    RENOTE_AFTER,
    ChangeWatch,
    Note,
    NoteKeeper,
    decode,
    encode,
)


def test_a_note_reads_back_as_written_and_garbage_is_refused() -> None:
    note = Note("w1", 3, 7, {"orders": 7, "prices~p1": 2})
    assert decode(encode(note)) == note
    for bad in (b"", b"{}", b'{"writer": "w", "epoch": 1, "seq": 1, "feeds": [1]}', b"[1]"):
        with pytest.raises(ValueError, match="not a change note"):
            decode(bad)


def _written(keeper: NoteKeeper, at: float) -> Note:
    note = keeper.note()
    keeper.written(note, at)
    return note


def test_a_new_writers_first_note_is_due_at_once_and_names_nothing() -> None:
    keeper = NoteKeeper(4, writer="w")
    assert keeper.due
    assert _written(keeper, 0.0) == Note("w", 4, 1, {})
    assert not keeper.due


@pytest.mark.parametrize(
    ("last_note", "commit_at", "due"),
    [
        (None, 10.0, True),  # never noted by this writer
        (9.5, 10.0, False),  # within R: the reader is still probing it
        (10.0 - RENOTE_AFTER, 10.0, False),  # exactly R: still covered
        (8.0, 10.0, True),  # more than R ago: noted again
    ],
)
def test_a_commit_is_noted_when_its_feed_was_never_or_not_lately_noted(
    last_note: float | None, commit_at: float, due: bool
) -> None:
    keeper = NoteKeeper(1, writer="w")
    _written(keeper, 0.0)
    if last_note is not None:
        keeper.committed(["t"], last_note)
        _written(keeper, last_note)
    keeper.committed(["t"], commit_at)
    assert keeper.due is due


def test_a_note_names_every_feed_committed_since_its_last_note_and_keeps_the_others() -> None:
    keeper = NoteKeeper(1, writer="w")
    _written(keeper, 0.0)
    keeper.committed(["a", "b"], 1.0)
    assert _written(keeper, 1.0).feeds == {"a": 2, "b": 2}
    keeper.committed(["b"], 1.5)  # within R of b's note: pending, not due
    assert not keeper.due
    keeper.committed(["c"], 1.6)  # never noted: due, and b (pending) goes with it
    assert _written(keeper, 1.6).feeds == {"a": 2, "b": 3, "c": 3}


def test_a_note_not_stored_stays_due_and_the_next_try_names_the_same_feeds() -> None:
    keeper = NoteKeeper(1, writer="w")
    _written(keeper, 0.0)
    keeper.committed(["a"], 5.0)
    first = keeper.note()  # its PUT failed: written() is not called
    assert keeper.due and keeper.note() == first


def test_reading_notes_sweeps_on_a_new_writer_and_activates_what_a_known_one_noted() -> None:
    watch = ChangeWatch()
    assert watch.read({"topics-0.json": Note("w", 1, 1, {"a": 1})}, 0.0).sweep  # first read
    assert watch.read({"topics-0.json": Note("w", 1, 1, {"a": 1})}, 1.0).feeds == set()  # nothing new
    news = watch.read({"topics-0.json": Note("w", 1, 3, {"a": 1, "b": 2, "c": 3})}, 2.0)
    assert not news.sweep and news.feeds == {"b", "c"}
    assert watch.read({"topics-0.json": Note("w2", 2, 1, {})}, 3.0).sweep  # another run of the writer
    assert watch.read({"topics-0.json": Note("w2", 2, 0, {})}, 4.0).sweep  # went back: be safe
    assert not watch.read({"topics-0.json": None}, 5.0).sweep  # gone: forgotten
    assert watch.read({"topics-0.json": Note("w2", 2, 5, {})}, 6.0).sweep  # back: read as new


@pytest.mark.parametrize(
    ("news", "started", "active_after"),
    [
        (True, 10.0, True),  # found new commits: stays
        (False, 10.0 + ACTIVE_FOR - 0.1, True),  # found nothing, but within Q of its news
        (False, 10.0 + ACTIVE_FOR, False),  # found nothing Q after: quiet
    ],
)
def test_an_active_feed_goes_quiet_only_after_a_probe_q_after_its_last_news(
    news: bool, started: float, active_after: bool
) -> None:
    watch = ChangeWatch()
    watch.read({"n": Note("w", 1, 0, {})}, 0.0)
    watch.read({"n": Note("w", 1, 1, {"a": 1})}, 10.0)
    watch.probed("a", news=news, started=started)
    assert ("a" in watch.active()) is active_after


def test_a_sweep_probes_every_feed_once_and_keeps_an_active_one() -> None:
    watch = ChangeWatch(sweep_interval=100.0)
    assert watch.sweep_due(0.0)
    watch.read({"n": Note("w", 1, 0, {})}, 0.0)
    watch.read({"n": Note("w", 1, 1, {"a": 1})}, 50.0)
    watch.sweep(["a", "b", "c"], 51.0)
    assert watch.active() == {"a", "b", "c"} and not watch.sweep_due(150.0) and watch.sweep_due(151.0)
    for feed in ("a", "b", "c"):
        watch.probed(feed, news=False, started=51.0)
    assert watch.active() == {"a"}  # its news (50.0) is not Q old yet


@pytest.mark.parametrize("gap", [0.0, 0.3, 0.7, RENOTE_AFTER])
@pytest.mark.parametrize("probe_every", [0.1, 0.5, 1.0])
def test_a_commit_the_writer_does_not_note_is_found_by_a_probe_before_its_feed_goes_quiet(
    gap: float, probe_every: float
) -> None:
    """The bound of the module docstring, played out: a commit noted at t0, the next at
    t1 = t0 + gap (not noted: gap <= R), the reader reads the note a little after t0 and probes
    every ``probe_every``; some probe that starts after t1 runs while the feed is active."""
    keeper, watch = NoteKeeper(1, writer="w"), ChangeWatch()
    watch.read({"n": _written(keeper, 0.0)}, 0.0)
    t0 = 5.0
    keeper.committed(["a"], t0)
    note = _written(keeper, t0)
    t1 = t0 + gap
    keeper.committed(["a"], t1)
    assert not keeper.due
    watch.read({"n": note}, t0 + 0.05)
    found_at = None
    t = t0 + 0.05
    while "a" in watch.active():
        news = t >= t1 and found_at is None  # the commit at t1 is there for a probe that starts after it
        if news:
            found_at = t
        watch.probed("a", news=news, started=t)
        t += probe_every
    assert found_at is not None
