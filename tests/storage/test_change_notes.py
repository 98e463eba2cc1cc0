"""The fan-out's source with change notes on a real S3 server (versitygw), counted where the
requests arrive (its access log): an idle source reads the notes and the catalog's next entry,
no topic table; a noted commit is found, and so is a commit the writer did not note within R
of its last note; a commit no note names (its writer died before noting it) is found by the
sweep that another run of the writer starts (sharedsub.core.fanout.change_notes)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from jobs.sources.deltars_topics import TopicsStreamReader, offset_versions
from sharedsub.core.fanout.change_notes import ACTIVE_FOR, NoteKeeper, note_name
from sharedsub.storage import schemas
from sharedsub.storage.change_notes import NotesInBackground, NoteWriter, list_notes, read_notes
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.topics import create_topic
from tests.s3_server import S3Server

TOPICS = [f"t{i}" for i in range(8)]


def _rows(seq: int) -> pa.Table:
    cols = {"seq": [seq], "message": [b"m%d" % seq]}
    return pa.table({f.name: pa.array(cols.get(f.name, [None]), f.type) for f in schemas.TOPIC})


class Writer:
    """One run of a topic writer: its appenders and its note (as the committer keeps them)."""

    def __init__(self, root: str, epoch: int) -> None:
        self.root = root
        self.note = NoteWriter(root, note_name(0), NoteKeeper(epoch))
        self.note.flush()
        self.appenders: dict[str, DeltaAppender] = {}
        self.seqs: dict[str, int] = {}

    def commit(self, topic: str, *, noted: bool = True) -> None:
        appender = self.appenders.setdefault(topic, DeltaAppender(f"{self.root}/topics/{topic}", schemas.TOPIC))
        seq = self.seqs.get(topic, 0)
        appender.append(_rows(seq))
        self.seqs[topic] = seq + 1
        self.note.committed([topic])
        if noted:
            self.note.flush()


def _reader(root: str) -> TopicsStreamReader:
    return TopicsStreamReader(
        {"data_dir": root, "change_notes": "true", "unsubscribed_topic_interval": "0", "first_batch_max_commits": "1000"}
    )


def _advance(reader: TopicsStreamReader, offset: dict) -> dict:
    return reader.latestOffset(offset, reader.getDefaultReadLimit())


def _quiet(reader: TopicsStreamReader, offset: dict) -> dict:
    """Probe until every feed has gone quiet (Q after its last news)."""
    deadline = time.monotonic() + ACTIVE_FOR + 5
    while reader._watch is not None and reader._watch.active():
        assert time.monotonic() < deadline, reader._watch.active()
        offset = _advance(reader, offset)
        time.sleep(0.2)
    return offset


@pytest.fixture
def topics_root(counted_root: str) -> str:
    for topic in TOPICS:
        create_topic(counted_root, topic)
    return counted_root


def test_an_idle_source_reads_the_notes_and_no_topic_table(topics_root: str, counted: S3Server) -> None:
    Writer(topics_root, 1)
    reader = _reader(topics_root)
    offset = _advance(reader, reader.initialOffset())  # the start's sweep: every topic once
    assert offset_versions(offset) == {t: 0 for t in TOPICS}
    offset = _quiet(reader, offset)
    start = counted.access_mark()
    for _ in range(5):
        assert _advance(reader, offset) == offset
    made = counted.requests_since(start)
    assert [key.rsplit("/", 2)[-2:] for _, key in made] == [["_changes", "topics-0.json"]] * 5, made
    assert list_notes(topics_root) == ["topics-0.json"]


def test_a_noted_commit_and_an_unnoted_one_within_r_are_found(topics_root: str) -> None:
    writer = Writer(topics_root, 1)
    reader = _reader(topics_root)
    offset = _quiet(reader, _advance(reader, reader.initialOffset()))
    writer.commit("t3")  # noted: t3 was never noted by this writer
    offset = _advance(reader, offset)
    assert offset_versions(offset)["t3"] == 1
    writer.commit("t3")  # within R of its note: not noted, found because t3 is active
    assert not writer.note.due
    offset = _advance(reader, offset)
    assert offset_versions(offset) == {**{t: 0 for t in TOPICS}, "t3": 2}


def test_a_commit_its_dead_writer_never_noted_is_found_by_the_next_writers_sweep(topics_root: str) -> None:
    first = Writer(topics_root, 1)
    reader = _reader(topics_root)
    offset = _quiet(reader, _advance(reader, reader.initialOffset()))
    first.commit("t5", noted=False)  # the writer dies here
    assert first.note.due
    for _ in range(3):
        offset = _advance(reader, offset)
    assert offset_versions(offset)["t5"] == 0  # nobody said so: not probed
    Writer(topics_root, 2)  # the slot's next run: its first note
    offset = _advance(reader, offset)
    assert offset_versions(offset) == {**{t: 0 for t in TOPICS}, "t5": 1}


def test_a_note_stored_in_the_background_names_the_commit_to_the_source(topics_root: str) -> None:
    """The fan-out's note (jobs/fanout.py) is stored by NotesInBackground's thread: the batch
    hands the tables over and goes on; the source then finds the commit by the stored note."""
    writer = Writer(topics_root, 1)
    reader = _reader(topics_root)
    offset = _quiet(reader, _advance(reader, reader.initialOffset()))
    background = NotesInBackground(writer.note)
    writer.commit("t5", noted=False)
    background.committed(["t5"])
    deadline = time.monotonic() + 30
    while writer.note.due:  # stored on the thread
        assert time.monotonic() < deadline, "the note was not stored in 30 s"
        time.sleep(0.02)
    note = read_notes(topics_root, ["topics-0.json"])["topics-0.json"]
    assert note is not None and "t5" in note.feeds
    offset = _advance(reader, offset)
    assert offset_versions(offset) == {**{t: 0 for t in TOPICS}, "t5": 1}
