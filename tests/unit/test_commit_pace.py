"""When a group commit may start (sharedsub.core.publish.commit_pace): which messages are
awaited, and how long a group still collects, as tables."""

from __future__ import annotations

import pytest

from sharedsub.core.config import commit_slots, fanout_batch_max_wait, group_company, load_settings
from sharedsub.core.errors import ConfigError
from sharedsub.core.publish.commit_pace import (
    FULL_GROUP,
    PIPELINED_FOR,
    Company,
    PublisherPace,
    collect_for,
    next_slot,
    slot_floor,
    slot_period,
)

GAP = 0.002


@pytest.mark.parametrize(
    ("unsettled", "settled_at", "now", "gap", "awaited", "why"),
    [
        (0, None, 10.0, GAP, False, "a link's first message: nothing says its publisher waits"),
        (0, 9.999, 10.0, GAP, True, "sent again 1 ms after its last settlement, nothing in flight"),
        (0, 9.75, 10.0, 0.25, True, "exactly the gap after its settlement"),
        (0, 9.99, 10.0, GAP, False, "10 ms after: a publisher on its own clock"),
        (1, 9.999, 10.0, GAP, False, "another of its messages is unsettled: it does not wait for each"),
        (3, None, 10.0, GAP, False, "several in flight"),
        (0, 9.9999, 10.0, 0.0, False, "gap 0: never"),
    ],
)
def test_a_message_is_awaited_when_its_link_had_nothing_in_flight_and_was_just_settled(
    unsettled: int, settled_at: float | None, now: float, gap: float, awaited: bool, why: str
) -> None:
    pace = PublisherPace(unsettled, settled_at)
    assert pace.arrived(now, gap) is awaited, why
    assert pace.unsettled == unsettled + 1


@pytest.mark.parametrize(
    ("unsettled", "count", "unsettled_after", "settled_at_after"),
    [
        (1, 1, 0, 5.0),  # the last one settled: the time is kept
        (3, 2, 1, 1.0),  # one still in flight: the earlier time stays
        (2, 5, 0, 5.0),  # never below zero
    ],
)
def test_settlements_count_down_and_stamp_the_moment_nothing_is_left(
    unsettled: int, count: int, unsettled_after: int, settled_at_after: float
) -> None:
    pace = PublisherPace(unsettled, 1.0)
    pace.settled(count, 5.0)
    assert (pace.unsettled, pace.settled_at) == (unsettled_after, settled_at_after)


def test_a_synchronous_publisher_is_awaited_from_its_second_message_on() -> None:
    pace = PublisherPace()
    seen = []
    t = 0.0
    for _ in range(4):
        seen.append(pace.arrived(t, GAP))
        t += 0.003  # its commit
        pace.settled(1, t)
        t += 0.0005  # the client sends the next one
    assert seen == [False, True, True, True]


def test_company_is_not_awaited_for_a_synchronous_publisher_even_when_it_is_late() -> None:
    """A synchronous publisher late now and then (not awaited: the timing rules) does not wait
    for company; one paced on its own clock, or with several in flight, does."""
    pace = PublisherPace()
    t = 0.0
    wants = []
    for late in (0.0005, 0.0005, 0.0005, 0.0005, 0.05, 0.0005):  # the fifth is late past the stretch
        t += late
        awaited = pace.arrived(t, GAP)
        wants.append((awaited, pace.wants_company(t)))
        t += 0.003
        pace.settled(1, t)
    assert wants == [(False, True), (True, False), (True, False), (True, False), (False, False), (True, False)]
    # ... a second and more after its last synchronous send, it is taken as any other
    assert pace.arrived(t + 1.5, GAP) is False and pace.wants_company(t + 1.5)
    # paced on its own clock, each settled before the next: never synchronous, so company
    paced = PublisherPace()
    for i in range(5):
        paced.arrived(0.1 * i, GAP)
        assert paced.wants_company(0.1 * i)
        paced.settled(1, 0.1 * i + 0.05)
    # several in flight: company, even right after a synchronous-looking send
    pipelined = PublisherPace()
    pipelined.arrived(0.0, GAP)
    pipelined.arrived(0.001, GAP)
    assert pipelined.wants_company(0.001)


@pytest.mark.parametrize(
    ("unsettled", "credit_left", "awaited", "why"),
    [
        (999, 0, True, "its window's last message: it can send nothing more until a settlement"),
        (0, 0, True, "credit for one message only"),
        (500, 1, False, "it may still send one more"),
        (500, None, False, "the link's credit not known: the timing rule alone"),
    ],
)
def test_a_message_that_uses_up_its_links_credit_is_awaited(
    unsettled: int, credit_left: int | None, awaited: bool, why: str
) -> None:
    pace = PublisherPace(unsettled, None)
    assert pace.arrived(10.0, GAP, credit_left) is awaited, why


def test_a_publisher_whose_window_is_full_is_awaited_from_its_second_round_on() -> None:
    # A client window of 4, far below the link's credit: each round's fourth message is awaited
    # once the first outcomes showed four in flight; the first round has nothing to go by.
    pace = PublisherPace()
    rounds = []
    for r in range(3):
        rounds.append([pace.arrived(r + 0.001 * i, GAP, credit_left=1000) for i in range(4)])
        pace.settled(4, r + 0.5)
    assert rounds == [[False] * 4, [False, False, False, True], [False, False, False, True]]
    assert pace.window == 4


def test_a_window_full_counts_only_when_its_last_message_came_right_after_the_one_before() -> None:
    # One message every 7 ms on its own clock, its first two sent together: the pair's outcomes
    # show a window of 2, and each later pair would be committed at once (in 2.4 ms, before its
    # next message) though the publisher was never held by it.
    pace = PublisherPace()
    pace.arrived(0.0, GAP, credit_left=1000)
    pace.arrived(0.0001, GAP, credit_left=1000)  # its first two together
    pace.settled(2, 0.030)  # their group, held by the interval
    assert pace.window == 2
    seen = []
    for i in range(6):
        seen.append(pace.arrived(0.035 + 0.007 * i, GAP, credit_left=1000))
    assert seen == [False] * 6
    # A window publisher sends what its outcomes free one message right after the other.
    pace = PublisherPace(window=3)
    assert [pace.arrived(1.0 + 0.0002 * i, GAP, credit_left=1000) for i in range(3)] == [False, False, True]


def test_a_window_seen_as_one_message_leaves_it_to_the_timing_rule() -> None:
    pace = PublisherPace()
    seen = []
    for t in (0.0, 1.0, 2.0):  # one message a second, each settled before the next
        seen.append(pace.arrived(t, GAP, credit_left=1000))
        pace.settled(1, t + 0.05)
    assert seen == [False, False, False] and pace.window == 1


def test_a_pipelining_publisher_is_never_awaited() -> None:
    pace = PublisherPace()
    seen = [pace.arrived(0.001 * i, GAP) for i in range(5)]  # five sent before any outcome
    pace.settled(5, 0.01)
    # sent on right after the batch's outcomes: timed as a synchronous send, but the link had
    # messages in flight at once just before
    seen += [pace.arrived(0.0101 + 0.001 * i, GAP) for i in range(1, 3)]
    assert seen == [False] * 7


def test_a_message_arriving_while_another_is_in_flight_ends_the_timing_rules_for_a_while() -> None:
    # One message every 7 ms; each committed at once in 5.5 ms comes 1.5 ms after the outcome
    # before it, as a synchronous send does.
    pace = PublisherPace()
    seen = [pace.arrived(0.000, GAP)]  # its first: nothing to go by
    pace.settled(1, 0.0055)
    seen.append(pace.arrived(0.007, GAP))  # 1.5 ms after: taken for a synchronous send
    pace.settled(1, 0.0125)
    seen.append(pace.arrived(0.014, GAP))
    seen.append(pace.arrived(0.021, GAP))  # that commit took 9 ms: this one comes while it is in flight
    pace.settled(1, 0.023)
    pace.settled(1, 0.060)  # its group, held by the interval
    seen.append(pace.arrived(0.0615, GAP))  # 1.5 ms after, nothing in flight: still not awaited
    seen.append(pace.arrived(0.0615 + PIPELINED_FOR, GAP, credit_left=0))  # the credit rule still holds
    assert seen == [False, True, True, False, False, True]


def test_the_timing_rules_come_back_once_nothing_was_in_flight_at_once_for_a_while() -> None:
    pace = PublisherPace()
    pace.arrived(0.0, GAP)
    pace.arrived(0.001, GAP)  # two in flight: a burst
    pace.settled(2, 0.005)
    seen, t = [], 0.005
    for _ in range(3):  # then synchronous sends, each 0.5 ms after the outcome of the one before
        t += 0.0005
        seen.append(pace.arrived(t, GAP))
        t += 0.004
        pace.settled(1, t)
    t = 0.001 + PIPELINED_FOR + 0.0005
    pace.settled(0, t)
    later = pace.arrived(t + 0.0005, GAP)
    assert seen == [False, False, False] and later is True


@pytest.mark.parametrize(
    ("floor_until", "now", "awaited", "publishes", "wait"),
    [
        (10.02, 10.0, False, 1, pytest.approx(0.02)),  # the interval is not over: collect until it is
        (10.02, 10.0, True, 1, 0.0),  # someone waits for this group: commit now
        (10.0, 10.5, False, 1, 0.0),  # the interval is over
        (0.0, 10.0, False, 1, 0.0),  # no group before
        (10.02, 10.0, False, FULL_GROUP - 1, pytest.approx(0.02)),  # a large group, not yet full
        (10.02, 10.0, False, FULL_GROUP, 0.0),  # full of publishes: the wait would not lower its cost per message
    ],
)
def test_a_group_collects_until_the_interval_is_over_unless_it_is_awaited_or_full(
    floor_until: float, now: float, awaited: bool, publishes: int, wait: float
) -> None:
    assert collect_for(floor_until, now, awaited, publishes) == wait


# The previous group started at 10.0; the interval ends at 10.05; company: 50 publishes or 0.15 s.
@pytest.mark.parametrize(
    ("now", "awaited", "publishes", "wait"),
    [
        (10.01, False, 60, pytest.approx(0.04)),  # the interval first, whatever the group holds
        (10.05, False, 5, pytest.approx(0.1)),  # light traffic: waits for company up to 0.15 s after 10.0
        (10.12, False, 49, pytest.approx(0.03)),
        (10.15, False, 5, 0.0),  # waited long enough
        (10.3, False, 1, 0.0),  # (a lone message after a quiet spell: at once)
        (10.05, False, 50, 0.0),  # company enough: under load it waits for the interval only
        (10.06, True, 5, 0.0),  # awaited: at once
        (10.01, True, 5, 0.0),
        (10.06, False, FULL_GROUP, 0.0),
    ],
)
def test_under_light_traffic_a_group_waits_for_company_after_the_interval(
    now: float, awaited: bool, publishes: int, wait: float
) -> None:
    company = Company(publishes=50, wait=0.15)
    assert collect_for(10.05, now, awaited, publishes, company=company, started=10.0) == wait


def test_without_company_a_group_after_the_interval_is_committed() -> None:
    assert collect_for(10.05, 10.06, False, 1, company=None, started=10.0) == 0.0


@pytest.mark.parametrize(
    ("gaps_ms", "awaited"),
    [
        # a synchronous publisher late now and then: still awaited once it has shown itself (3 quick sends)
        ((1, 1, 1, 1, 15), [True, True, True, True, True]),
        ((1, 1, 1, 15, 1), [True, True, True, True, True]),
        # late before the streak was built: the timing rule, and the streak starts again
        ((1, 1, 15, 1, 1, 1, 15), [True, True, False, True, True, True, True]),
        # later than the stretch (10 x 2 ms): not awaited, and the streak is gone
        ((1, 1, 1, 1, 25, 15), [True, True, True, True, False, False]),
        # a slow steady publisher (one message every 50 ms, settled in 5): never
        ((45, 45, 45, 45), [False, False, False, False]),
    ],
)
def test_a_link_shown_synchronous_is_awaited_when_it_is_late_now_and_then(gaps_ms: tuple[int, ...], awaited: list[bool]) -> None:
    pace = PublisherPace()
    assert pace.arrived(0.0, GAP) is False  # its first message
    t, seen = 0.0, []
    for gap_ms in gaps_ms:
        t += 0.005  # its commit
        pace.settled(1, t)
        t += gap_ms / 1000  # the client sends the next one this long after the outcome
        seen.append(pace.arrived(t, GAP))
    assert seen == awaited, gaps_ms


@pytest.mark.parametrize(
    ("min_interval", "trigger", "period"),
    [
        (0.05, 0.1, 0.05),  # two slots a trigger
        (0.03, 0.1, 0.1 / 3),  # three
        (0.04, 0.1, 0.05),  # stretched: never more commits than the interval allows
        (0.1, 0.1, 0.1),
        (0.15, 0.1, 0.2),  # one slot every other trigger
        (0.1, 0.05, 0.1),
    ],
)
def test_slot_period(min_interval: float, trigger: float, period: float) -> None:
    got = slot_period(min_interval, trigger)
    assert got == pytest.approx(period)
    assert got >= min_interval - 1e-9
    # one phase to the triggers: a whole number of slots fills a trigger, or the reverse
    ratio = trigger / got if got <= trigger else got / trigger
    assert ratio == pytest.approx(round(ratio))


@pytest.mark.parametrize(
    ("at", "period", "lead", "slot"),
    [
        (1000.00, 0.05, 0.02, 1000.03),  # the next multiple is 1000.05: 0.02 before it
        (1000.03, 0.05, 0.02, 1000.03),  # on a slot: that slot
        (1000.031, 0.05, 0.02, 1000.08),
        (999.98, 0.05, 0.02, 999.98),
        (1000.00, 0.1, 0.015, 1000.085),
    ],
)
def test_next_slot(at: float, period: float, lead: float, slot: float) -> None:
    assert next_slot(at, period=period, lead=lead) == pytest.approx(slot)


@pytest.mark.parametrize(
    ("started", "floor"),
    [
        # Slots (period 0.05, lead 0.02) at ...0.03 and ...0.08; interval 0.05.
        (1000.030, 1000.080),  # started on a slot: the next one
        (1000.034, 1000.080),  # woken 4 ms late: still the next one, not one later
        (1000.040, 1000.130),  # 10 ms late: 40 ms to the next would be under the interval less a tenth
        (1000.050, 1000.130),  # off the slots (an awaited group): no sooner than 45 ms after it
        (1000.056, 1000.130),
    ],
)
def test_slot_floor(started: float, floor: float) -> None:
    got = slot_floor(started, min_interval=0.05, period=0.05, lead=0.02)
    assert got == pytest.approx(floor)
    assert got - started >= 0.05 - 0.05 / 10 - 1e-9


@pytest.mark.parametrize(
    ("environ", "slots"),
    [
        ({}, None),  # the defaults start micro-batches at commits: no grid to keep slots to
        ({"SHAREDSUB_FANOUT_START_ON_COMMIT": "false"}, (0.07, 0.02)),  # the grid: a slot per 0.07 s trigger, 20 ms before it
        ({"SHAREDSUB_FANOUT_START_ON_COMMIT": "false", "SHAREDSUB_PUBLISH_COMMIT_LEAD": "0"}, None),  # off
        ({"SHAREDSUB_FANOUT_START_ON_COMMIT": "false", "SHAREDSUB_FANOUT_TRIGGER_INTERVAL": "0"}, None),
        ({"SHAREDSUB_FANOUT_START_ON_COMMIT": "false", "SHAREDSUB_PUBLISH_MIN_COMMIT_INTERVAL": "0"}, None),
        ({"SHAREDSUB_FANOUT_START_ON_COMMIT": "false", "SHAREDSUB_STORAGE_DATA_DIR": "s3://bucket/data"}, None),
    ],
)
def test_commit_slots_only_on_the_trigger_grid_of_a_local_data_dir(
    environ: dict[str, str], slots: tuple[float, float] | None
) -> None:
    assert commit_slots(load_settings(environ=environ)) == slots


@pytest.mark.parametrize(
    ("environ", "company", "source_wait"),
    [
        ({}, Company(publishes=50, wait=0.15), 0.0),  # the defaults: the group waits, the source does not
        ({"SHAREDSUB_FANOUT_BATCH_MIN_ROWS": "20", "SHAREDSUB_FANOUT_BATCH_MAX_WAIT": "0.3"}, Company(20, 0.3), 0.0),
        ({"SHAREDSUB_FANOUT_BATCH_MAX_WAIT": "0"}, None, 0.0),  # nobody waits
        ({"SHAREDSUB_FANOUT_START_ON_COMMIT": "false"}, None, 0.15),  # the grid: the source waits
        ({"SHAREDSUB_STORAGE_DATA_DIR": "s3://bucket/data"}, None, 0.15),  # (the job does not pass it on a bucket)
    ],
)
def test_company_is_waited_for_where_the_micro_batch_begins(
    environ: dict[str, str], company: Company | None, source_wait: float
) -> None:
    settings = load_settings(environ=environ)
    assert group_company(settings) == company
    assert fanout_batch_max_wait(settings) == source_wait


def test_commit_lead_is_checked() -> None:
    with pytest.raises(ConfigError, match="publish.commit_lead"):
        load_settings(environ={"SHAREDSUB_PUBLISH_COMMIT_LEAD": "-1"})
