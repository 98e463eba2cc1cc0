"""``sharedsub topics create|list`` as a user runs them (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sharedsub.core import layout
from sharedsub.storage import schemas
from sharedsub.storage.delta.table_reads import read_table
from sharedsub.storage.delta.tables import table_exists


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sharedsub", *args], capture_output=True, text=True, timeout=120)


def test_create_and_list(tmp_path: Path) -> None:
    r = run("topics", "create", "orders", "--data-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "created topic orders" in r.stdout
    run("topics", "create", "news.eu", "--data-dir", str(tmp_path))
    r = run("topics", "list", "--data-dir", str(tmp_path))
    assert r.stdout.split() == ["news.eu", "orders"]
    r = run("topics", "list", "--data-dir", str(tmp_path), "--json")
    assert json.loads(r.stdout) == [{"name": "news.eu"}, {"name": "orders"}]
    # A topic is a Delta table with the documented schema.
    table = read_table(layout.topic_table(str(tmp_path), "orders"))
    assert table is None or table.num_rows == 0
    assert table_exists(layout.topic_table(str(tmp_path), "orders"))
    from deltalake import DeltaTable

    names = [f.name for f in DeltaTable(layout.topic_table(str(tmp_path), "orders")).schema().fields]
    assert names == schemas.TOPIC.names


def test_create_existing_topic_fails(tmp_path: Path) -> None:
    assert run("topics", "create", "orders", "--data-dir", str(tmp_path)).returncode == 0
    r = run("topics", "create", "orders", "--data-dir", str(tmp_path))
    assert r.returncode == 4
    assert "already exists" in r.stderr


def test_invalid_topic_name(tmp_path: Path) -> None:
    r = run("topics", "create", "a/b", "--data-dir", str(tmp_path))
    assert r.returncode == 2
    assert "invalid topic name" in r.stderr


def test_list_empty_data_dir(tmp_path: Path) -> None:
    r = run("topics", "list", "--data-dir", str(tmp_path / "nothing"))
    assert r.returncode == 0
    assert r.stdout == ""


def test_config_error_names_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[publish]\ncredit = 'lots'\n")
    r = run("topics", "list", "--data-dir", str(tmp_path), "--config", str(cfg))
    assert r.returncode == 2
    assert "publish.credit" in r.stderr
