"""sharedsub.core.fanout.fanout_pacing as a table: when a topic's new commits go into the next batch."""

from __future__ import annotations

import pytest

from sharedsub.core.fanout.fanout_pacing import takes_commits


@pytest.mark.parametrize(
    ("subscribed", "new_commits", "since", "interval", "takes"),
    [
        (True, True, None, 5.0, True),  # a subscribed topic: always
        (True, True, 0.1, 5.0, True),
        (True, False, 0.1, 5.0, True),
        (False, False, 0.1, 5.0, True),  # nothing new: nothing to hold
        (False, True, None, 5.0, True),  # never taken yet: at once
        (False, True, 5.0, 5.0, True),  # the interval is over
        (False, True, 7.5, 5.0, True),
        (False, True, 4.99, 5.0, False),  # taken 4.99 s ago: held
        (False, True, 0.0, 5.0, False),
        (False, True, 0.0, 0.0, True),  # holding off
    ],
)
def test_takes_commits(subscribed: bool, new_commits: bool, since: float | None, interval: float, takes: bool) -> None:
    assert takes_commits(subscribed=subscribed, new_commits=new_commits, since_last_taken=since, interval=interval) is takes
