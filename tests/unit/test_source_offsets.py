"""The sharedsub_topics source's offset rules (pure functions; no Spark session, no tables)."""

from __future__ import annotations

import json

import pytest

from jobs.sources.deltars_topics import continue_from, make_offset, offset_ids, offset_versions


@pytest.mark.parametrize(
    ("version", "offset_id", "current_id", "older", "expected"),
    [
        (4, "a", "a", False, 4),  # the same table: continue after its version
        (4, "a", "b", False, -1),  # a different table under the same name: everything
        (4, None, "b", False, 4),  # an offset written before ids existed: the same table
        (4, "a", None, False, 4),  # no table (dropped): nothing changes
        (4, None, "b", True, -1),  # the table is older than the offset: a different one
        (4, "a", "a", True, -1),
        (-1, "a", "b", False, -1),
    ],
)
def test_continue_from(version: int, offset_id: str | None, current_id: str | None, older: bool, expected: int) -> None:
    assert continue_from(version, offset_id, current_id, older=older) == expected


def test_offsets_round_trip_through_json_with_and_without_ids() -> None:
    offset = make_offset({"b": 2, "a": -1}, {"b": "id-b", "a": None, "gone": "id-x"})
    assert offset == {"topics": {"a": -1, "b": 2}, "ids": {"b": "id-b"}}
    back = json.loads(json.dumps(offset))
    assert offset_versions(back) == {"a": -1, "b": 2} and offset_ids(back) == {"b": "id-b"}
    # The format written before ids existed.
    assert make_offset({"a": 1}) == {"topics": {"a": 1}}
    assert offset_ids({"topics": {"a": 1}}) == {} and offset_ids(None) == {}
