"""The global bound on uncommitted bytes (sharedsub.core.publish.publish_window), one rule per test."""

from __future__ import annotations

from sharedsub.core.publish.publish_window import PublishWindow


def test_below_the_limit_credit_is_granted_at_once() -> None:
    w: PublishWindow[str] = PublishWindow(100)
    w.queued(99)
    assert w.grant("a", 5) == 5 and w.release() == []


def test_at_the_limit_credit_is_owed_and_paid_when_commits_bring_it_below() -> None:
    w: PublishWindow[str] = PublishWindow(100)
    w.queued(60)
    w.queued(40)
    assert w.full
    assert w.grant("a", 3) == 0 and w.grant("b", 1) == 0 and w.grant("a", 2) == 0
    assert (w.owed("a"), w.owed("b")) == (5, 1)
    w.committed(10)
    assert sorted(w.release()) == [("a", 5), ("b", 1)]
    assert w.release() == [] and w.owed("a") == 0


def test_nothing_is_released_while_still_full() -> None:
    w: PublishWindow[str] = PublishWindow(10)
    w.queued(30)
    assert w.grant("a", 1) == 0
    w.committed(10)
    assert w.full and w.release() == []
    w.committed(15)
    assert w.release() == [("a", 1)]


def test_zero_means_no_limit() -> None:
    w: PublishWindow[str] = PublishWindow(0)
    w.queued(10**12)
    assert not w.full and w.grant("a", 7) == 7


def test_failed_commits_count_as_done_and_the_total_never_goes_negative() -> None:
    w: PublishWindow[str] = PublishWindow(10)
    w.committed(5)
    assert w.uncommitted == 0 and w.grant("a", 0) == 0
