"""The cyclic collector run on the reactor thread only (connectors/amqp/reactor_gc.py), and the
rule that says which generation is due (sharedsub.core.ops.gc_tuning.due_generation)."""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from connectors.amqp.reactor_gc import ReactorCollector
from sharedsub.core.ops.gc_tuning import IDLE_LOOK, QUIET_GROWTH, THRESHOLDS, due_generation, next_look


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ((9_999, 0, 0), None),
        ((9_999, 50, 50), None),
        ((10_000, 0, 0), 0),
        ((10_000, 19, 50), 0),
        ((10_000, 20, 0), 1),
        ((10_000, 20, 19), 1),
        ((10_000, 20, 20), 2),
        ((50_000, 3, 20), 0),
    ],
)
def test_the_generation_due_is_cpythons_choice(counts: tuple[int, int, int], expected: int | None) -> None:
    assert due_generation(counts, THRESHOLDS) == expected


class _Loop:
    """A loop that keeps what is scheduled; a test runs it by hand."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, ReactorCollector]] = []

    def schedule(self, delay: float, target: ReactorCollector) -> object:
        self.scheduled.append((delay, target))
        return None


@contextlib.contextmanager
def _collecting(loop: _Loop) -> Iterator[ReactorCollector]:
    """A started collector on ``loop``; stopped after without giving collection back, and the
    test process's own setting (on or off) restored."""
    was = gc.isenabled()
    collector = ReactorCollector(loop)
    try:
        collector.start()
        yield collector
    finally:
        collector.stop(give_back=False)
        if was:
            gc.enable()
        else:
            gc.disable()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_cycles_are_freed_by_the_collectors_thread_only_and_collection_comes_back_at_stop() -> None:
    before = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(100, 10, 10)
    loop = _Loop()
    collector = ReactorCollector(loop)
    try:
        collector.start()
        assert not gc.isenabled() and len(loop.scheduled) == 1
        freed_on: list[str] = []
        cycle = _Cycle()
        weakref.finalize(cycle, lambda: freed_on.append(threading.current_thread().name))
        del cycle

        kept: list[list[int]] = []

        def allocate() -> None:  # far past the young threshold, on another thread (kept: net allocations count)
            kept.extend([i] for i in range(10_000))

        other = threading.Thread(target=allocate, name="not-the-reactor")
        other.start()
        other.join()
        assert freed_on == []  # no automatic collection took it there

        runner = threading.Thread(target=lambda: collector.on_timer_task(None), name="the-reactor")
        runner.start()
        runner.join()
        assert freed_on == ["the-reactor"] and sum(collector.collections) == 1
        assert len(loop.scheduled) == 2  # it keeps looking
    finally:
        collector.stop()
        assert gc.isenabled()
        collector.on_timer_task(None)  # stopped: neither collects nor reschedules
        assert len(loop.scheduled) == 2
        gc.set_threshold(*before[1])
        if not before[0]:
            gc.disable()


def test_the_services_stop_leaves_automatic_collection_off() -> None:
    # The stop sequence (connectors/amqp/server.py finish_stop) stops collecting on the reactor
    # but does not give collection back: a committer still draining its last group must not
    # free proton wrappers on its thread through a collection its allocations trigger.
    was = gc.isenabled()
    collector = ReactorCollector(_Loop())
    try:
        gc.enable()
        collector.start()
        collector.stop(give_back=False)
        assert not gc.isenabled() and collector.stopped
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


def test_a_look_turns_automatic_collection_off_again_when_something_gave_it_back() -> None:
    # CPython 3.11's subprocess turns the collector back on after a fork with a preexec_fn that
    # began while it was on (the fan-out's child is started so): a look must take it back.
    with _collecting(_Loop()) as collector:
        collector.on_timer_task(None)
        assert collector.taken_back == 0
        gc.enable()  # what such a fork does behind the collector's back
        collector.on_timer_task(None)
        assert not gc.isenabled() and collector.taken_back == 1
        collector.on_timer_task(None)
        assert collector.taken_back == 1


@pytest.mark.parametrize(
    ("interval", "grown", "collected", "expected"),
    [
        (0.05, 100, False, 0.05),
        (1.0, 5_000, False, 0.05),
        (1.0, -100, False, 0.05),
        (0.4, 3, True, 0.05),
        (0.05, 0, False, 0.1),
        (0.05, 99, False, 0.1),
        (0.1, -99, False, 0.2),
        (0.8, 10, False, 1.0),
        (1.0, 10, False, 1.0),
    ],
)
def test_an_idle_process_is_looked_at_less_often_down_to_once_a_second(
    interval: float, grown: int, collected: bool, expected: float
) -> None:
    assert next_look(interval, base=0.05, grown=grown, collected=collected) == pytest.approx(expected)


def test_the_collector_backs_off_while_nothing_is_allocated_and_comes_back_at_the_next_allocations() -> None:
    loop = _Loop()
    with _collecting(loop) as collector:
        for _ in range(6):
            collector.on_timer_task(None)
        assert loop.scheduled[-1][0] == pytest.approx(IDLE_LOOK)  # 0.1, 0.2, 0.4, 0.8, 1.0, 1.0
        kept = [[i] for i in range(QUIET_GROWTH * 3)]  # traffic resumes: allocations net of frees
        collector.on_timer_task(None)
        assert loop.scheduled[-1][0] == pytest.approx(collector.interval) and len(kept) == QUIET_GROWTH * 3
