"""connectors.amqp.arrow_pool: the timer releases Arrow's unused memory and reschedules itself on a
real proton reactor until stopped."""

from __future__ import annotations

from typing import Any

from proton.reactor import Container

from connectors.amqp.arrow_pool import ArrowPoolRelease


class _Stop:
    def __init__(self, container: Any, release: ArrowPoolRelease) -> None:
        self.container, self.release = container, release

    def on_timer_task(self, event: Any) -> None:
        self.release.stop()
        self.container.stop()


def test_it_runs_again_and_again_until_stopped() -> None:
    container = Container()
    release = ArrowPoolRelease(container, interval=0.01)
    container.schedule(0.01, release)
    container.schedule(0.5, _Stop(container, release))
    container.run()
    assert release.releases >= 5  # 0.5 s of 10 ms timers, on a busy machine at least a few
    assert release.stopped
