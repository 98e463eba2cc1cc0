"""connectors.amqp.wire.engine_loop: timers, events injected from other threads, stopping. A real loop
on this thread (a real selector and socket pair); proton events are tested in test_proton_events
and the sockets in tests/e2e/test_listener_loop.py."""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from typing import Any

import pytest
from proton import Handler

from connectors.amqp.wire.engine_loop import EngineLoop, Injector


class _Recorder(Handler):
    def __init__(self) -> None:
        self.got: list[Any] = []
        self.loop: EngineLoop | None = None
        self.stop_after: int | None = None

    def item(self, subject: Any) -> None:
        self.got.append(subject)
        if self.stop_after is not None and len(self.got) >= self.stop_after and self.loop is not None:
            self.loop.stop()

    def fail(self) -> None:
        raise RuntimeError("handler fault")


def _run(loop: EngineLoop, limit: float = 30.0) -> None:
    """Run ``loop`` on another thread; fail if it has not stopped within ``limit`` seconds (a
    loop that does not wake or stop would otherwise hang the suite)."""
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), "the loop did not stop"


def test_timers_run_in_deadline_order_and_a_cancelled_one_does_not() -> None:
    loop = EngineLoop(_Recorder())
    ran: list[str] = []

    class Task:
        def on_timer_task(self, event: Any) -> None:
            assert event.container is loop
            ran.append("b")

    loop.schedule(0.06, lambda: ran.append("c"))
    loop.schedule(0.01, lambda: ran.append("a"))
    loop.schedule(0.03, lambda: ran.append("cancelled")).cancel()
    loop.schedule(0.03, Task())
    loop.schedule(0.1, loop.stop)
    _run(loop)
    assert ran == ["a", "b", "c"]


def test_a_timer_that_fails_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    loop = EngineLoop(_Recorder())
    ran: list[str] = []

    def bad() -> None:
        raise RuntimeError("timer fault")

    loop.schedule(0.0, bad)
    loop.schedule(0.01, lambda: ran.append("after"))
    loop.schedule(0.02, loop.stop)
    with caplog.at_level(logging.ERROR):
        _run(loop)
    assert ran == ["after"]
    assert "timer fault" in caplog.text


def test_events_from_other_threads_arrive_each_thread_in_order() -> None:
    handler = _Recorder()
    loop = EngineLoop(handler)
    handler.loop = loop
    threads, per_thread = 4, 500
    handler.stop_after = threads * per_thread

    def produce(k: int) -> None:
        for i in range(per_thread):
            loop.injector.call(functools.partial(handler.item, (k, i)))

    producers = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
    for p in producers:
        p.start()
    _run(loop)  # nothing scheduled: only the injector's wake-ups can end the loop's waits
    for p in producers:
        p.join()
    assert len(handler.got) == threads * per_thread
    for k in range(threads):
        assert [i for kk, i in handler.got if kk == k] == list(range(per_thread))


def test_an_event_that_fails_is_logged_and_the_next_one_is_handled(caplog: pytest.LogCaptureFixture) -> None:
    handler = _Recorder()
    loop = EngineLoop(handler)
    handler.loop = loop
    handler.stop_after = 1
    loop.injector.call(handler.fail)
    loop.injector.call(functools.partial(handler.item, "next"))
    with caplog.at_level(logging.ERROR):
        _run(loop)
    assert handler.got == ["next"]
    assert "handler fault" in caplog.text


def test_a_waiting_loop_is_woken_by_a_trigger() -> None:
    handler = _Recorder()
    loop = EngineLoop(handler)
    handler.loop = loop
    handler.stop_after = 1
    threading.Timer(0.2, lambda: loop.injector.call(functools.partial(handler.item, 1))).start()
    _run(loop)  # with no timer the loop waits an hour unless the trigger wakes it
    assert handler.got == [1]


def test_a_call_made_as_the_previous_one_is_answered_wakes_the_loop_every_time() -> None:
    """One thread waits for each call's answer, then queues the next (what the cluster port and
    the admin endpoint do): no other wake-up comes, so a lost one hangs the loop for an hour.
    Clearing the flag before reading the wake-up bytes lost one within a few such calls."""
    import concurrent.futures

    loop = EngineLoop(_Recorder())
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        for i in range(300):
            answered: concurrent.futures.Future[int] = concurrent.futures.Future()
            loop.injector.call(functools.partial(answered.set_result, i))
            assert answered.result(5) == i, f"call {i} was not run"
    finally:
        loop.injector.call(loop.stop)
        thread.join(5)


def test_a_closed_injector_drops_what_comes_after() -> None:
    injector = Injector()
    handler = _Recorder()
    loop = EngineLoop(handler, injector=injector)
    injector.call(functools.partial(handler.item, "kept"))
    injector.close()
    injector.call(functools.partial(handler.item, "dropped"))
    loop.schedule(0.05, loop.stop)
    _run(loop)
    assert handler.got == ["kept"]


@pytest.mark.timeout(60)
def test_triggers_from_a_signal_handler_on_the_loops_own_thread_all_arrive() -> None:
    # sharedsub serve stops on SIGTERM through the injector, from a handler that Python runs on
    # the main thread (the loop's) between two bytecodes: possibly inside take() itself, between
    # reading the queue and emptying it (a take() that copies then clears loses such events:
    # this test fails for it). Thousands of signals land while the loop spins through take().
    handler = _Recorder()
    loop = EngineLoop(handler)
    handler.loop = loop
    sent = [0]
    spinning = threading.Event()
    spinning.set()

    def on_signal(signum: int, frame: Any) -> None:
        sent[0] += 1
        loop.injector.call(functools.partial(handler.item, sent[0]))

    def spin() -> None:  # keeps the loop in take() and dispatch, where signals land
        if spinning.is_set():
            loop.injector.call(spin)

    def signaller(target: int) -> None:
        while spinning.is_set():
            signal.pthread_kill(target, signal.SIGUSR1)
            time.sleep(0.0002)

    def finish() -> None:
        spinning.clear()
        loop.schedule(0.1, loop.stop)

    old = signal.signal(signal.SIGUSR1, on_signal)
    kill = threading.Thread(target=signaller, args=(threading.get_ident(),))
    try:
        kill.start()
        loop.injector.call(spin)
        loop.schedule(1.5, finish)
        loop.run()  # on this thread, the one Python runs signal handlers on
    finally:
        spinning.clear()
        kill.join()
        signal.signal(signal.SIGUSR1, old)
    assert sent[0] > 100
    assert handler.got == list(range(1, sent[0] + 1))


def test_a_steady_stream_of_injected_events_does_not_starve_timers() -> None:
    # Another thread's results can arrive faster than they are handled; the loop must still get
    # round to its sockets and timers (here: an event that triggers the next, for ever).
    handler = _Recorder()
    loop = EngineLoop(handler)

    def spin() -> None:
        loop.injector.call(spin)

    loop.injector.call(spin)
    loop.schedule(0.1, loop.stop)
    _run(loop)
