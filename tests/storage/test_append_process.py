"""The append child process (sharedsub.storage.commits.append_process) on real Delta tables.

Appends land in order with increasing versions; a child that dies between appends is started
again; an append retried with its commit id after the process that tried it died finds the commit
instead of writing the rows twice; an error in the child comes back with its message; the child
dies with its parent. The committer's storage-fault behaviour through the child is covered in
tests/storage/test_disk_faults.py.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from sharedsub.core import layout
from sharedsub.runtime.committer import Committer
from sharedsub.runtime.payloads import PayloadCache
from sharedsub.storage import schemas
from sharedsub.storage.commits.append_process import AppendProcess, ChildProcessAppendError
from sharedsub.storage.commits.commit_store import DeltaStore
from sharedsub.storage.commits.py_columns import PyColumns
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.blind_append import CHECKPOINT_INTERVAL
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.topics import create_topic
from tests.amqp_peer import wait_for
from tests.storage.test_committer import Collector
from tests.storage.test_disk_faults import _publish, _rows, _seqs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def appends() -> Iterator[AppendProcess]:
    proc = AppendProcess()
    yield proc
    proc.stop()


def _topic(root: Path) -> str:
    create_topic(str(root), "t")
    return layout.topic_table(str(root), "t")


def test_appends_land_in_order(tmp_path: Path, appends: AppendProcess) -> None:
    table = _topic(tmp_path)
    appender = appends.appender(table, schemas.TOPIC, fsync=True)
    versions = [appender.append(_rows(5 * i), commit_id=f"c{i}") for i in range(4)]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert _seqs(table) == list(range(20))


def test_a_child_that_died_between_appends_is_started_again(tmp_path: Path, appends: AppendProcess) -> None:
    table = _topic(tmp_path)
    appender = appends.appender(table, schemas.TOPIC)
    appender.append(_rows(0), commit_id="a")
    first = appends.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: appends.pid is None, 10, "the child to be gone")
    appender.append(_rows(5), commit_id="b")
    assert appends.pid not in (None, first)
    assert _seqs(table) == list(range(10))


def test_a_retry_after_the_trying_process_died_finds_its_commit(tmp_path: Path) -> None:
    """The child's half of the restart: a fresh appender told where to look finds the commit."""
    table = _topic(tmp_path)
    before = DeltaAppender(table, schemas.TOPIC).append(_rows(0), commit_id="first")
    landed = DeltaAppender(table, schemas.TOPIC).append(_rows(5), commit_id="lost-reply")
    again = DeltaAppender(table, schemas.TOPIC).append(_rows(5), commit_id="lost-reply", tried_after=before)
    assert again == landed
    assert _seqs(table) == list(range(10))  # the rows once


def test_an_error_in_the_child_comes_back_with_its_message(tmp_path: Path, appends: AppendProcess) -> None:
    table = _topic(tmp_path)
    wrong = pa.table({"seq": pa.array([1], pa.int64())})  # not the topic schema
    bad = appends.appender(table, wrong.schema)
    with pytest.raises(ChildProcessAppendError, match="[Ss]chema"):
        bad.append(wrong, commit_id="x")
    bad.close()  # what the committer does with an appender that failed
    assert appends.appender(table, schemas.TOPIC).append(_rows(0), commit_id="y") >= 1  # and it goes on


def _columns(first: int, n: int) -> dict[str, list[object]]:
    """Rows as the committer hands them over: column lists, application properties included."""
    cols: dict[str, list[object]] = {name: [None] * n for name in schemas.TOPIC.names}
    prop = {"type": "uint", "long": 7, "double": None, "string": None, "bool": None}
    cols.update(
        seq=list(range(first, first + n)),
        published_at=[dt.datetime(2025, 1, 1, tzinfo=dt.UTC)] * n,
        message=[bytearray([i % 256]) * 100 for i in range(first, first + n)],
        routing_key=["k"] * n,
        publisher=["c"] * n,
        partition=[0] * n,
        size=[100] * n,
        durable=[True] * n,
        application_properties=[[("p", prop), ("s\u00e9", dict(prop, type="string", long=None, string="v"))]] * n,
    )
    return cols


def test_rows_as_column_lists_are_converted_in_the_child(tmp_path: Path, appends: AppendProcess) -> None:
    """A topic append given as column lists lands as the Arrow table the committer would have made."""
    table = _topic(tmp_path)
    appender = appends.appender(table, schemas.TOPIC, fsync=True)
    appender.append(PyColumns(schemas.TOPIC, _columns(0, 3)), commit_id="a")
    appender.append(_rows(3), commit_id="b")  # an Arrow table after it, on the same appender
    assert _seqs(table) == list(range(8))
    stored = read_table(table).sort_by("seq").slice(0, 3)
    assert stored.equals(pa.Table.from_pydict(_columns(0, 3), schema=schemas.TOPIC))


def test_column_lists_that_do_not_fit_the_schema_come_back_as_the_childs_error(
    tmp_path: Path, appends: AppendProcess
) -> None:
    table = _topic(tmp_path)
    appender = appends.appender(table, schemas.TOPIC)
    cols = _columns(0, 2)
    cols["seq"] = ["not a number", 1]
    with pytest.raises(ChildProcessAppendError, match="Arrow"):
        appender.append(PyColumns(schemas.TOPIC, cols), commit_id="x")
    appender.close()
    assert appends.appender(table, schemas.TOPIC).append(PyColumns(schemas.TOPIC, _columns(0, 2)), commit_id="y") >= 1
    assert _seqs(table) == [0, 1]


def test_the_child_dies_with_its_parent(tmp_path: Path) -> None:
    parent = textwrap.dedent(
        """
        import os, sys, time
        from sharedsub.storage.commits.append_process import AppendProcess
        p = AppendProcess()
        p.start()
        print(p.pid, flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    os.kill(child, 0)  # running
    proc.kill()
    proc.wait(10)

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        # a zombie until reaped by init: its state in /proc says so
        with open(f"/proc/{child}/stat") as stat:
            return stat.read().split(") ")[1].startswith("Z")

    wait_for(gone, 10, "the append child to die with its parent")


def test_the_committer_commits_through_the_child(tmp_path: Path) -> None:
    create_topic(str(tmp_path), "t")
    done = Collector()
    appends = AppendProcess()
    c = Committer(DeltaStore(str(tmp_path), fsync=True, appends=appends), cache=PayloadCache(1 << 20), on_done=done)
    c.start()
    try:
        child = appends.pid
        for i in range(50):
            c.submit(_publish(i))
        results = done.wait(50)
    finally:
        c.stop()
    assert child is not None and appends.pid is None  # started with the committer, stopped with it
    assert sorted(r.value for r in results) == list(range(50))
    assert _seqs(layout.topic_table(str(tmp_path), "t")) == list(range(50))


def test_a_child_stopped_while_it_writes_a_checkpoint_waits_for_it_and_exits_cleanly(tmp_path: Path) -> None:
    """A table's 100th commit starts a checkpoint on a thread of the child; stopping the child
    right after it used to end the interpreter under that thread (exit -11, SIGSEGV)."""
    table = _topic(tmp_path)
    appends = AppendProcess()
    appends.start()
    child = appends._proc  # noqa: SLF001 (its exit code, read after stop)
    assert child is not None
    appender = appends.appender(table, schemas.TOPIC, fsync=True)
    version = -1
    while version < CHECKPOINT_INTERVAL:
        version = appender.append(_rows(version + 1, 1, 10), commit_id=f"c{version}")
    appends.stop()
    assert child.returncode == 0
    assert os.path.exists(os.path.join(table, "_delta_log", f"{CHECKPOINT_INTERVAL:020d}.checkpoint.parquet"))


def test_a_store_without_a_child_waits_for_its_appenders_checkpoints_when_it_stops(tmp_path: Path) -> None:
    table = _topic(tmp_path)
    store = DeltaStore(str(tmp_path), appends=None)
    appender = store.appender(table, schemas.TOPIC)
    version = -1
    while version < CHECKPOINT_INTERVAL:
        version = appender.append(_rows(version + 1, 1, 10), commit_id=f"c{version}")
    store.stop()
    assert os.path.exists(os.path.join(table, "_delta_log", f"{CHECKPOINT_INTERVAL:020d}.checkpoint.parquet"))
