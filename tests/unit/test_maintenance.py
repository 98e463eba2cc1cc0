"""Maintenance planning rules: the ack watermark and which old generations may go."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pytest

from sharedsub.core.model import SubscriptionState
from sharedsub.runtime.maintenance import ack_watermark, generation_of, removable_generations
from tests.builders import subscription

# (routed seqs, settled seqs, watermark)
WATERMARKS = [
    ([], [], None),
    ([], [1, 2], None),
    ([5], [], None),
    ([5], [5], 5),
    ([5, 6, 7], [5, 6, 7], 7),
    ([5, 6, 7], [5, 7], 5),  # shared consumers ack out of order: 7 waits for 6
    ([5, 6, 7], [6, 7], None),
    ([7, 5, 6], [6, 5], 6),  # routed order does not matter
    ([2, 4, 8], [2, 3, 4, 9], 4),  # settled seqs that were never routed are ignored
]


@pytest.mark.parametrize(("routed", "settled", "expected"), WATERMARKS)
def test_ack_watermark(routed: list[int], settled: list[int], expected: int | None) -> None:
    assert ack_watermark(np.array(routed, np.int64), np.array(settled, np.int64)) == expected


@pytest.mark.parametrize(
    ("name", "generation"),
    [("g1", 1), ("g12", 12), ("acks-g3", 3), ("dlq-g4", 4), ("g", None), ("x-g1", None), ("g1.tmp", None), ("_delta_log", None)],
)
def test_generation_of(name: str, generation: int | None) -> None:
    assert generation_of(name) == generation


NOW = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
WEEK = dt.timedelta(days=7)


def _record(generation: int, *, created_ago: dt.timedelta, updated_ago: dt.timedelta | None = None, deleted: bool = False):  # noqa: ANN202
    rec = subscription("t", generation=generation)
    return dataclasses.replace(
        rec,
        created_at=NOW - created_ago,
        updated_at=NOW - (updated_ago if updated_ago is not None else created_ago),
        state=SubscriptionState.DELETED if deleted else SubscriptionState.ACTIVE,
    )


# (record, generations on disk, removable)
GENERATIONS = [
    (None, [1, 2], []),  # unknown key: keep everything
    (_record(3, created_ago=8 * DAY), [1, 2, 3], [1, 2]),  # older generations ended 8 days ago
    (_record(3, created_ago=6 * DAY), [1, 2, 3], []),  # inside the retention: replay may need them
    (_record(3, created_ago=8 * DAY), [3, 4], []),  # never the current one, nor a newer one being made
    (_record(2, created_ago=30 * DAY, updated_ago=8 * DAY, deleted=True), [1, 2], [1, 2]),
    (_record(2, created_ago=30 * DAY, updated_ago=DAY, deleted=True), [1, 2], []),
    (_record(2, created_ago=30 * DAY, updated_ago=8 * DAY, deleted=True), [2, 3], [2]),
]


@pytest.mark.parametrize(("record", "on_disk", "expected"), GENERATIONS)
def test_removable_generations(record, on_disk: list[int], expected: list[int]) -> None:  # noqa: ANN001
    assert removable_generations(record, on_disk, NOW, WEEK) == expected


def _non_durable(record):  # noqa: ANN001, ANN202
    return dataclasses.replace(record, identity=dataclasses.replace(record.identity, durable=False))


SECONDS = dt.timedelta(seconds=1)

# (record, generations on disk, fan-out caught up, removable): a non-durable subscription's ended
# generations go once the grace passed, when the fan-out routes nothing more to them.
NON_DURABLE = [
    (_non_durable(_record(2, created_ago=30 * DAY, updated_ago=60 * SECONDS, deleted=True)), [1, 2], True, [1, 2]),
    (_non_durable(_record(2, created_ago=30 * DAY, updated_ago=60 * SECONDS, deleted=True)), [1, 2], False, []),
    (_non_durable(_record(2, created_ago=30 * DAY, updated_ago=8 * DAY, deleted=True)), [1, 2], False, [1, 2]),
    (_non_durable(_record(2, created_ago=30 * DAY, updated_ago=2 * SECONDS, deleted=True)), [2], True, []),  # grace
    (_non_durable(_record(3, created_ago=60 * SECONDS)), [2, 3], True, [2]),  # never the current generation
    (_record(2, created_ago=30 * DAY, updated_ago=60 * SECONDS, deleted=True), [1, 2], True, []),  # durable: retention
]


@pytest.mark.parametrize(("record", "on_disk", "caught_up", "expected"), NON_DURABLE)
def test_removable_generations_of_non_durable_subscriptions(
    record, on_disk: list[int], caught_up: bool, expected: list[int]  # noqa: ANN001
) -> None:
    assert removable_generations(record, on_disk, NOW, WEEK, fanout_caught_up=caught_up) == expected
