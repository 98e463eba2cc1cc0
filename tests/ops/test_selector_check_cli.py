"""``sharedsub selector check 'EXPR'`` as a user runs it: parse, explain, or point at the error."""

from __future__ import annotations

import json
import subprocess
import sys

from sharedsub.core.fanout.explain import HEADER_FIELDS
from sharedsub.core.selector import ast


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sharedsub", "selector", "check", *args], capture_output=True, text=True, timeout=60
    )


def test_valid_selector_is_explained() -> None:
    r = run("region = 'eu' and JMSPriority > 4 OR n between 1 and 3 and region <> 'us'", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["valid"] is True and out["matches_everything"] is False
    assert out["normalized"] == "(((region = 'eu') AND (JMSPriority > 4)) OR ((n BETWEEN 1 AND 3) AND (region <> 'us')))"
    assert [(i["name"], i["kind"], i["type"]) for i in out["identifiers"]] == [
        ("region", "property", "property"),
        ("JMSPriority", "header", "number"),
        ("n", "property", "property"),
    ]
    assert out["identifiers"][1]["reads"].startswith("header.priority")
    assert "`priority`" in out["spark_sql"] and "`application_properties`['region']" in out["spark_sql"]


def test_human_output() -> None:
    r = run("JMSType = 'order' AND color LIKE 'r%'")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "valid"
    assert lines[1] == "normalized: ((JMSType = 'order') AND (color LIKE 'r%'))"
    assert lines[3].split() == ["NAME", "KIND", "TYPE", "READS"]
    assert lines[4].split()[:3] == ["JMSType", "header", "string"] and "properties.subject" in lines[4]
    assert lines[5].split()[:3] == ["color", "property", "property"]
    assert lines[-1].startswith("spark sql: ")


def test_blank_selector_matches_everything() -> None:
    r = run("  ", "--json")
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert (out["matches_everything"], out["normalized"], out["identifiers"]) == (True, None, [])


def test_invalid_selector_exits_2_with_the_position() -> None:
    r = run("color = ")
    assert r.returncode == 2
    assert r.stdout == ""
    assert 'invalid JMS selector "color = " at position 9' in r.stderr
    r = run("a = 1 AND AND b", "--json")
    assert r.returncode == 2
    out = json.loads(r.stdout)
    assert (out["valid"], out["position"]) == (False, 11)
    assert "position 11" in out["error"]


def test_every_header_has_a_field_description() -> None:
    assert set(HEADER_FIELDS) == set(ast.HEADER_TYPES)


def test_limits_are_named_and_a_selector_too_large_for_spark_sql_is_a_clear_error() -> None:
    r = run("a = 1" + " = TRUE" * 100)
    assert r.returncode == 2
    assert "expected an expression at most 100 operators deep (the selector depth limit), found one 102 deep" in r.stderr
    # Valid (an attach accepts it) but over the Spark SQL back end's size: an error, no traceback.
    r = run(" OR ".join(f"a = {i}" for i in range(100)), "--json")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    out = json.loads(r.stdout)
    assert "is valid (subscriptions route with it) but too large for the Spark SQL back end" in out["error"]
