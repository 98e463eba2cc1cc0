"""``sharedsub subscriptions list|show``, ``backlog`` and ``selector check`` run as a user runs
them (a subprocess), on a data dir a real service run built (see conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sharedsub.core import layout
from tests.ops.conftest import EXPECTED_BACKLOG, EXPECTED_CONSUMERS, PUBLISHED, TOPIC, OpsDataDir

pytestmark = pytest.mark.e2e

PROJECT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharedsub", *args], cwd=PROJECT, capture_output=True, text=True, timeout=120
    )


def key_of(namespace: str, name: str, *, shared: bool, durable: bool) -> str:
    return layout.subscription_key(namespace, name, shared=shared, durable=durable)


def test_subscriptions_list_json(ops: OpsDataDir) -> None:
    r = run("subscriptions", "list", "--data-dir", str(ops.data_dir), "--json")
    assert r.returncode == 0, r.stderr
    found = {s["name"]: s for s in json.loads(r.stdout)}
    assert set(found) == set(EXPECTED_BACKLOG)
    assert {n: s["backlog"]["messages"] for n, s in found.items()} == EXPECTED_BACKLOG
    assert {n: len(s["consumers"]) for n, s in found.items()} == EXPECTED_CONSUMERS
    billing = found["app-1:billing"]
    assert billing["key"] == key_of("app-1", "billing", shared=True, durable=True)
    assert (billing["shared"], billing["durable"], billing["topic"], billing["binding"]) == (True, True, TOPIC, "#")
    assert billing["backlog"]["exact"] is True
    assert billing["backlog"]["routed"] == PUBLISHED
    assert sorted(c["link"] for c in billing["consumers"]) == ["billing", "billing|2"]
    assert {c["container"] for c in billing["consumers"]} == {"app-1"}
    archive = found["app-2:archive"]
    assert (archive["shared"], archive["durable"], archive["selector"]) == (False, True, "region = 'eu'")
    assert archive["backlog"]["routed"] == 5
    assert found["app-1:live"]["backlog"]["exact"] is False  # non-durable: no ack log
    # Every message of the backlog was published: its age is known and not negative.
    assert all(s["backlog"]["oldest_age_s"] >= 0 for s in found.values())
    # Bytes are the encoded sizes of the pending messages: more per message than the body.
    assert billing["backlog"]["bytes"] > 7 * len("order 0")


def test_subscriptions_list_human(ops: OpsDataDir) -> None:
    r = run("subscriptions", "list", "--data-dir", str(ops.data_dir))
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["NAME", "KIND", "SOURCE", "GEN", "CONSUMERS", "BACKLOG", "OLDEST", "STATE", "KEY"]
    by_name = {row.split()[0]: row for row in rows}
    assert set(by_name) == set(EXPECTED_BACKLOG)
    assert key_of("app-2", "archive", shared=False, durable=True) in by_name["app-2:archive"]
    assert " shared durable " in by_name["app-1:billing"]
    assert "<=10" in by_name["app-1:live"]  # an upper bound, marked as one


def test_subscriptions_show_by_each_form_of_name(ops: OpsDataDir) -> None:
    key = key_of("app-2", "archive", shared=False, durable=True)
    for name in (key, "app-2:archive", "archive"):
        r = run("subscriptions", "show", name, "--data-dir", str(ops.data_dir), "--json")
        assert r.returncode == 0, r.stderr
        shown = json.loads(r.stdout)
        assert shown["key"] == key
        assert shown["selector"] == "region = 'eu'"
        assert shown["generation"] >= 1 and shown["consumers"] == []
        assert shown["backlog"]["messages"] == 5
    r = run("subscriptions", "show", "app-1:billing", "--data-dir", str(ops.data_dir))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "shared durable" in text
    assert key_of("app-1", "billing", shared=True, durable=True) in text
    assert "consumers (2):" in text and "billing|2" in text
    assert "backlog:" in text
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert total.split()[1] == "7"


def test_ambiguous_name_lists_the_candidates_and_exits_2(ops: OpsDataDir) -> None:
    r = run("subscriptions", "show", "billing", "--data-dir", str(ops.data_dir))
    assert r.returncode == 2
    assert r.stdout == ""
    for ns in ("app-1", "app-3"):
        assert key_of(ns, "billing", shared=True, durable=True) in r.stderr
    r = run("backlog", "billing", "--data-dir", str(ops.data_dir), "--json")
    assert r.returncode == 2


def test_unknown_subscription_exits_3(ops: OpsDataDir) -> None:
    for args in (("subscriptions", "show", "nope"), ("backlog", "app-1:nope")):
        r = run(*args, "--data-dir", str(ops.data_dir))
        assert r.returncode == 3, r.stderr
        assert "no subscription" in r.stderr


def test_backlog_of_one_subscription_per_partition(ops: OpsDataDir) -> None:
    r = run("backlog", "app-1:billing", "--data-dir", str(ops.data_dir), "--json")
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["key"] == key_of("app-1", "billing", shared=True, durable=True)
    assert shown["messages"] == 7
    parts = shown["partitions"]
    assert parts and sum(p["messages"] for p in parts) == 7
    assert sum(p["routed"] for p in parts) == PUBLISHED
    assert sum(p["bytes"] for p in parts) == shown["bytes"]
    r = run("backlog", "app-1:billing", "--data-dir", str(ops.data_dir))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split() == ["PARTITION", "MESSAGES", "BYTES", "OLDEST", "ROUTED"]
    assert len(lines) == 2 + len(parts) + 1  # title, header, partitions, total


def test_backlog_of_every_subscription(ops: OpsDataDir) -> None:
    r = run("backlog", "--data-dir", str(ops.data_dir), "--json")
    assert r.returncode == 0, r.stderr
    assert {s["name"]: s["messages"] for s in json.loads(r.stdout)} == EXPECTED_BACKLOG
    r = run("backlog", "--data-dir", str(ops.data_dir))
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["NAME", "MESSAGES", "BYTES", "OLDEST", "PARTITIONS", "ROUTED", "KEY"]
    assert {row.split()[0]: row.split()[1] for row in rows} == {
        "app-1:billing": "7", "app-3:billing": "10", "app-2:archive": "5", "app-1:live": "<=10"
    }


def test_empty_data_dir_has_no_subscriptions(tmp_path: Path) -> None:
    r = run("subscriptions", "list", "--data-dir", str(tmp_path), "--json")
    assert (r.returncode, json.loads(r.stdout)) == (0, [])
    r = run("backlog", "--data-dir", str(tmp_path))
    assert (r.returncode, r.stdout.strip()) == (0, "no subscriptions")
    assert run("subscriptions", "show", "x", "--data-dir", str(tmp_path)).returncode == 3
