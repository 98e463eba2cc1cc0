"""The dispatch-ownership tables of sharedsub.core.ownership.partition_owners, row by row."""

from __future__ import annotations

import pytest

from sharedsub.core.ownership.partition_owners import Action, Owner, decide, desired_owners, idle_members

# (partitions, members with consumers, desired owners)
DESIRED = [
    ([0, 1], [], {0: None, 1: None}),
    ([0, 1], [0, 1], {0: 0, 1: 1}),  # each member its own partition
    ([0, 1], [1], {0: 1, 1: 1}),
    ([0, 1], [0], {0: 0, 1: 0}),
    ([0], [0, 1], {0: 0}),  # member 1's consumers wait
    ([0], [1, 2], {0: 1}),  # no writer with consumers: the lowest slot
    ([0, 1, 2, 3], [1, 3], {0: 1, 1: 1, 2: 3, 3: 3}),
    ([0, 1, 2, 3, 4], [0, 4], {0: 0, 4: 4, 1: 0, 2: 4, 3: 0}),
    ([2, 5], [0, 1, 2], {2: 2, 5: 0}),
]


@pytest.mark.parametrize(("partitions", "members", "owners"), DESIRED)
def test_desired_owners(partitions: list[int], members: list[int], owners: dict[int, int | None]) -> None:
    assert desired_owners(partitions, members) == owners
    assert desired_owners(partitions, list(reversed(members))) == owners  # the same whatever the reading order


def test_members_that_get_no_partition_are_named() -> None:
    assert idle_members([0], [0, 1]) == [1]
    assert idle_members([0, 1], [0, 1]) == []
    assert idle_members([0, 1], []) == []


LIVE, DEAD = True, False

# (row, me, partitions, members with consumers, owner records, actions)
ROWS = [
    ("1 keep mine", 0, [0], [0], {0: Owner(0, LIVE)}, {0: Action.KEEP}),
    ("2 take a free partition", 1, [0, 1], [0, 1], {0: Owner(0, LIVE)}, {0: Action.NOTHING, 1: Action.TAKE}),
    (
        "2 take a dead owner's partition",
        0, [0, 1], [0], {0: Owner(0, LIVE), 1: Owner(1, DEAD)}, {0: Action.KEEP, 1: Action.TAKE},
    ),
    (
        "3 wait for a live owner to release",
        1, [0, 1], [0, 1], {0: Owner(0, LIVE), 1: Owner(0, LIVE)}, {0: Action.NOTHING, 1: Action.WAIT},
    ),
    (
        "4 release to a newcomer",
        0, [0, 1], [0, 1], {0: Owner(0, LIVE), 1: Owner(0, LIVE)}, {0: Action.KEEP, 1: Action.RELEASE},
    ),
    (
        "4 release when my consumers left",
        0, [0, 1], [1], {0: Owner(0, LIVE), 1: Owner(1, LIVE)}, {0: Action.RELEASE, 1: Action.NOTHING},
    ),
    ("4 release when nobody has consumers", 0, [0], [], {0: Owner(0, LIVE)}, {0: Action.RELEASE}),
    ("5 not mine, not for me", 2, [0, 1], [0, 1], {0: None, 1: Owner(1, LIVE)}, {0: Action.NOTHING, 1: Action.NOTHING}),
]


@pytest.mark.parametrize(("row", "me", "partitions", "members", "owners", "actions"), ROWS, ids=[r[0] for r in ROWS])
def test_what_a_member_does(
    row: str, me: int, partitions: list[int], members: list[int], owners: dict[int, Owner | None], actions: dict[int, Action]
) -> None:
    assert decide(me, partitions, members, owners) == actions, row


def test_two_members_reading_the_same_state_never_both_take_or_keep_a_partition() -> None:
    """Whatever the records say, for one reading at most one member keeps or takes each partition."""
    import itertools

    partitions = [0, 1, 2]
    for members in ([0], [0, 1], [1, 2], [0, 1, 2]):
        for records in itertools.product([None, Owner(0, LIVE), Owner(1, LIVE), Owner(1, DEAD), Owner(2, LIVE)], repeat=3):
            owners = dict(zip(partitions, records, strict=True))
            for p in partitions:
                holding = [m for m in (0, 1, 2) if decide(m, partitions, members, owners)[p] in (Action.KEEP, Action.TAKE)]
                assert len(holding) <= 1, (members, owners, p, holding)
