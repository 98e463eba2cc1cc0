"""bench/requests_bill.py's pure parts (issue 42 item 5): the price of requests at S3 list prices,
the table directory of a key and the busiest one per S3 limit class, the delivery check, and
the markdown table and limits line."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bill_module() -> ModuleType:
    """bench/requests_bill.py, imported the way the bench scripts do (bench/ on sys.path)."""
    bench = str(ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module("requests_bill")


bill = _bill_module()
access = importlib.import_module("s3_access_log")
MONTH = 30 * 24 * 3600


def _req(verb: str, key: str, agent: str = "ua-obstore") -> Any:
    return access.Request(verb=verb, key=key, status=200, total_ms=1, user_agent=agent)


@pytest.mark.parametrize(("verb", "per_1000"), [
    ("PUT", 0.005), ("LIST", 0.005), ("CopyObject", 0.005), ("CompleteMultipartUpload", 0.005),
    ("GET", 0.0004), ("HEAD", 0.0004), ("GetBucketAcl", 0.0004), ("DELETE", 0.0), ("AbortMultipartUpload", 0.0),
])
def test_one_request_per_second_costs_its_list_price_for_30_days(verb: str, per_1000: float) -> None:
    assert bill.usd_per_month({verb: 1.0}) == pytest.approx(per_1000 / 1000 * MONTH)


def test_a_month_of_mixed_requests_adds_up() -> None:
    # 2 PUT/s ($25.92), 10 GET/s ($10.368), 5 DELETE/s (free).
    assert bill.usd_per_month({"PUT": 2.0, "GET": 10.0, "DELETE": 5.0}) == pytest.approx(25.92 + 10.368)


@pytest.mark.parametrize(("key", "prefix"), [
    ("data/topics/t1/_delta_log/00000000000000000007.json", "data/topics/t1/"),
    ("data/topics/t1/_delta_log/", "data/topics/t1/"),  # a LIST's prefix
    ("data/topics/t1/part-00000-abc.parquet", "data/topics/t1/"),
    ("data/subscriptions/k/g1/day=2026-01-01/part-0.parquet", "data/subscriptions/k/g1/"),
    ("data/_cluster/members/3", "data/_cluster/members/"),
    ("_users.json", ""),
])
def test_table_dir(key: str, prefix: str) -> None:
    assert bill.table_dir(key) == prefix


def test_busiest_prefix_per_limit_class() -> None:
    reqs = (
        [_req("PUT", "data/topics/a/_delta_log/1.json")] * 3
        + [_req("DELETE", "data/topics/b/_delta_log/1.json")] * 4  # DELETE is a write for the limit
        + [_req("GET", "data/topics/a/_delta_log/1.json")] * 10
        + [_req("LIST", "data/topics/b/_delta_log/")] * 2
        + [_req("HEAD", "data/topics/b/_delta_log/2.json")] * 9
    )
    got = bill.busiest_prefixes(reqs, 2.0)
    assert got == {
        "write": {"prefix": "data/topics/b/", "per_s": 2.0, "limit_per_s": 3500},
        "read": {"prefix": "data/topics/b/", "per_s": 5.5, "limit_per_s": 5500},
    }
    assert bill.busiest_prefixes([_req("GET", "data/topics/a/x.parquet")], 1.0).keys() == {"read"}


def test_bill_of_a_window() -> None:
    reqs = [_req("PUT", "data/topics/a/_delta_log/1.json")] * 20 + [
        _req("GET", "data/subscriptions/k/g1/_delta_log/1.json", "ua-delta")] * 40
    out = bill.bill(reqs, {"ua-obstore": "sharedsub", "ua-delta": "delta-rs"}, 10.0, 500)
    assert out["requests_per_s"] == 6.0
    assert out["by_verb_per_s"] == {"GET": 4.0, "PUT": 2.0}
    assert out["by_family_per_s"] == {"subscriptions": 4.0, "topics": 2.0}
    assert out["by_client_per_s"] == {"delta-rs": 4.0, "sharedsub": 2.0}
    assert out["requests_per_1000_messages"] == 120.0
    assert out["usd_per_month"] == pytest.approx(round(bill.usd_per_month({"PUT": 2.0, "GET": 4.0}), 2))
    assert bill.bill(reqs, {}, 10.0, 0)["requests_per_1000_messages"] is None


def test_delivery_check_counts_missing_duplicates_and_strays() -> None:
    expected = bill.expected_deliveries([0, 1, 0], topics=2, sent=6, not_accepted=[4])
    assert expected == {0: {0, 2}, 1: {1, 3, 5}, 2: {0, 2}}
    got = {0: {0: 1, 2: 2}, 1: {1: 1, 3: 1, 5: 1, 4: 1}, 2: {0: 1}}
    assert bill.delivery_check(expected, got) == {
        "expected": 7, "delivered": 8, "missing": 1, "duplicates": 1, "unexpected": 1,
    }
    assert bill.delivery_check(expected, {0: {0: 1, 2: 1}, 1: {1: 1, 3: 1, 5: 1}, 2: {0: 1, 2: 1}})["missing"] == 0


def _row(rate: float, *, failed: bool = False, prefix_per_s: float = 1.0) -> dict[str, Any]:
    return {
        "topics": 1, "subscriptions": 1, "rate": rate, "requests_per_s": 12.345,
        "by_verb_per_s": {"PUT": 2.0, "GET": 3.0, "HEAD": 1.5, "LIST": 0.5},
        "requests_per_1000_messages": None if not rate else 1234.56, "usd_per_month": 1234.5,
        "failed": failed,
        "deliveries": {"missing": 3, "duplicates": 0, "not_accepted": 0, "publisher_errors": 0},
        "busiest_prefix": {"write": {"prefix": "data/topics/bill-0/", "per_s": prefix_per_s, "limit_per_s": 3500}},
    }


def test_table_rows() -> None:
    lines = bill.table([_row(0.0), _row(100.0), _row(1000.0, failed=True)]).splitlines()
    assert lines[0].startswith("| config | rate (msg/s) | req/s | PUT/s | GET+HEAD/s | LIST/s |")
    assert lines[2] == "| 1x1 | idle | 12.35 | 2.00 | 4.50 | 0.50 | – | 1,234.50 | – |"
    assert lines[3] == "| 1x1 | 100 | 12.35 | 2.00 | 4.50 | 0.50 | 1,234.6 | 1,234.50 | yes |"
    assert lines[4].endswith("| **no** (3 missing, 0 duplicated, 0 not accepted, 0 publisher errors) |")


def test_limits_line_names_both_limits_and_the_busiest_prefix() -> None:
    line = bill.limits_line([_row(10.0, prefix_per_s=4.0), _row(1000.0, prefix_per_s=40.0)])
    assert "3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests/s per prefix" in line
    assert "40.00 PUT/COPY/POST/DELETE/s on `data/topics/bill-0/` (1x1, 1000 msg/s)" in line
    assert "GET/HEAD/s on" not in line  # no read-class figure in these rows
