"""Tables on a real S3 server (versitygw): the storage layer and the CLI on an ``s3://`` data dir.

Found by trying it as a new user would (issue 28): ``topics create`` wrote the table to the
bucket and a stray local directory ``./s3:/...``, and ``topics list`` then printed nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from sharedsub.storage import schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.commit_log import latest_version, read_commit, table_id
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import remove_table, table_exists
from sharedsub.storage.topics import create_topic, last_seq, list_topics, topic_files
from tests.s3_server import S3Server

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharedsub", *args],
        env={**os.environ, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_topics_create_and_list_on_s3_from_the_command_line(s3_server: S3Server, tmp_path: Path) -> None:
    data = s3_server.url("ssdata")
    env = {**s3_server.env(), "PYTHONPATH": str(ROOT)}
    made = _cli("topics", "create", "orders", "--data-dir", data, env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert f"created topic orders at {data}/topics/orders" in made.stdout
    again = _cli("topics", "create", "orders", "--data-dir", data, env=env, cwd=tmp_path)
    assert again.returncode != 0 and "already exists" in again.stderr
    assert _cli("topics", "create", "books", "--data-dir", data, env=env, cwd=tmp_path).returncode == 0
    listed = _cli("topics", "list", "--data-dir", data, env=env, cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.split() == ["books", "orders"], listed.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written beside the process (no ./s3:/...)


def test_appends_reads_and_probes_of_a_table_on_s3(s3_server: S3Server, s3_env: dict[str, str]) -> None:
    root = s3_server.url("ssdata")
    table = create_topic(root, "t")
    assert table_exists(table) and list_topics(root) == ["t"] and table_id(table)
    assert latest_version(table) == 0 and last_seq(table) == -1
    appender = DeltaAppender(table, schemas.TOPIC)
    for start in (0, 3):
        n = 3
        rows = {"seq": list(range(start, start + n)), "message": [b"m%d" % i for i in range(start, start + n)]}
        appender.append(pa.table({f.name: pa.array(rows.get(f.name, [None] * n), f.type) for f in schemas.TOPIC}))
    assert latest_version(table) == 2 and latest_version(table, 0) == 2
    commit = read_commit(table, 2)
    assert commit is not None and len(commit.added) == 1 and commit.added[0].startswith(table + "/")
    data = read_table(table, ["seq", "message"])
    assert data is not None and sorted(data.column("seq").to_pylist()) == list(range(6))
    version, files = topic_files(table)
    assert version == 2 and sorted((f.first_seq, f.last_seq) for f in files) == [(0, 2), (3, 5)]
    assert last_seq(table) == 5
    remove_table(table)
    assert not table_exists(table) and list_topics(root) == []
