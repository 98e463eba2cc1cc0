"""The lease decision tables of sharedsub.core.ownership.lease, row by row."""

from __future__ import annotations

import dataclasses

import pytest

from sharedsub.core.ownership.lease import (
    Create,
    Held,
    LeaseRecord,
    Lost,
    Refuse,
    Retry,
    Seen,
    TakeOver,
    Watch,
    decide_renewal,
    decide_take,
)

REC = LeaseRecord("host-a:41:ab12", epoch=4, host="host-a", pid=41, ttl_s=15.0, renew_s=3.0, amqp="amqp://10.0.0.1:5672")


def _released() -> LeaseRecord:
    return dataclasses.replace(REC, released=True)


def _seen(*, watched: float = 0.0, changed: bool = False, alive: bool | None = None) -> Seen:
    return Seen(REC, '"tag"', watched, changed, alive)


@pytest.mark.parametrize(
    ("row", "seen", "expected"),
    [
        ("1 no lease", None, Create(1)),
        ("2 holder of this host gone", _seen(alive=False), TakeOver(5, '"tag"', "its holder, process 41 of this host, is gone")),
        ("2 released", Seen(_released(), '"tag"', 0.0, False, True), TakeOver(5, '"tag"', "released by its holder")),
        (
            "2 before the ttl too",
            _seen(watched=0.0, alive=False),
            TakeOver(5, '"tag"', "its holder, process 41 of this host, is gone"),
        ),
        ("3 unchanged for the ttl", _seen(watched=15.0), TakeOver(5, '"tag"', "not renewed for 15 s (ttl 15 s)")),
        ("3 another host's, unchanged", _seen(watched=16.0, alive=None), TakeOver(5, '"tag"', "not renewed for 16 s (ttl 15 s)")),
        ("4 renewed while watched", _seen(watched=1.0, changed=True), Refuse(REC)),
        ("4 renewed, holder of this host alive", _seen(watched=1.0, changed=True, alive=True), Refuse(REC)),
        ("5 just read", _seen(watched=0.0), Watch(3.0)),
        ("5 near the ttl: wait only the rest", _seen(watched=14.0, alive=True), Watch(1.0)),
    ],
)
def test_taking(row: str, seen: Seen | None, expected: object) -> None:
    assert decide_take(seen) == expected, row


@pytest.mark.parametrize(
    ("row", "result", "since", "expected"),
    [
        ("a renewed", "renewed", 100.0, Held()),
        ("b taken over", "refused", 0.5, Lost("the lease was taken over by another front end")),
        ("c unanswered, young", "unanswered", 5.0, Retry()),
        ("c unanswered, just under ttl - renew", "unanswered", 11.9, Retry()),
        ("d unanswered at ttl - renew", "unanswered", 12.0, Lost("the lease could not be renewed for 12 s (ttl 15 s)")),
        ("d unanswered, long", "unanswered", 40.0, Lost("the lease could not be renewed for 40 s (ttl 15 s)")),
    ],
)
def test_holding(row: str, result: str, since: float, expected: object) -> None:
    assert decide_renewal(result, since_renewed_s=since, ttl_s=15.0, renew_s=3.0) == expected, row  # type: ignore[arg-type]


def test_a_holder_stops_before_a_taker_may_take_over() -> None:
    """For every moment the holder still serves (Retry), a taker watching from the last
    renewal's send has not yet reached the TTL: the two never both write."""
    for tenth in range(0, 400):
        since = tenth / 10
        serving = isinstance(decide_renewal("unanswered", since_renewed_s=since, ttl_s=15.0, renew_s=3.0), Retry)
        taken = isinstance(decide_take(_seen(watched=since)), TakeOver)
        assert not (serving and taken), since


def test_record_round_trip_and_refusal_of_other_bodies() -> None:
    assert LeaseRecord.from_json(REC.to_json()) == REC
    assert b"token" not in REC.to_json()
    for body in (b"", b"{}", b"[1]", b'{"holder": "x"}', b"\xff"):
        with pytest.raises(ValueError, match="not a lease record"):
            LeaseRecord.from_json(body)
