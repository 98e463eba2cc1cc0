"""Counting object-store requests by kind and table family (sharedsub.storage.objects.request_counts)."""

from __future__ import annotations

import pytest

from sharedsub.storage.objects.request_counts import RequestCounts, family


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("ss/topics/orders/_delta_log/00000000000000000001.json", "topics"),
        ("ss/subscriptions/shared-durable~g~s~ab/g1/_delta_log/00000000000000000000.json", "subscriptions"),
        ("ss/subscriptions/shared-durable~g~s~ab/acks-g1/part-0.parquet", "subscriptions"),
        ("ss/catalog/subscriptions/_delta_log/00000000000000000003.json", "catalog"),
        ("ss/_cluster/owner", "cluster"),
        ("_cluster/probe/abc", "cluster"),
        ("ss/_fanout/pending/x/0-1.parquet", "fanout"),
        ("ss/_users.json", "users"),
        ("ss/somewhere/else", "other"),
        ("", "other"),
    ],
)
def test_family_of_a_key(key: str, expected: str) -> None:
    assert family(key) == expected


def test_counts_by_kind_and_family() -> None:
    counts = RequestCounts()
    for _ in range(3):
        counts.add("head", "ss/topics/t/_delta_log/00000000000000000002.json")
    counts.add("put_if_match", "ss/_cluster/owner")
    assert counts.snapshot() == {("head", "topics"): 3, ("put_if_match", "cluster"): 1}
