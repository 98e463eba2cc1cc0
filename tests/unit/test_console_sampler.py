"""The console's sampler (connectors/http/console_sampler.py) with a stand-in for the service's
counters and for the other members' answers: what it samples, when, and how members add up."""

from __future__ import annotations

from collections.abc import Mapping

from connectors.http.console_sampler import ConsoleSampler, MemberFigures
from sharedsub.core.model import SubscriptionRecord
from sharedsub.core.ops.metrics import CounterKey


class _Service:
    """The two reads the sampler makes of a service."""

    def __init__(self, slot: int | None) -> None:
        self.values: dict[CounterKey, int] = {}
        self.slot = slot

    def counters(self) -> Mapping[CounterKey, int]:
        return dict(self.values)

    def member(self) -> dict[str, object] | None:
        return None if self.slot is None else {"slot": self.slot, "idle_consumers": []}


def _sampler(
    service: _Service, peers: dict[int, dict[CounterKey, int] | None]
) -> tuple[ConsoleSampler, list[int], list[int]]:
    clock = iter(range(0, 10_000, 10))
    asked: list[int] = []
    backlog_reads: list[int] = []

    def fetch(url: str) -> MemberFigures:
        slot = int(url.rsplit(":", 1)[1])
        asked.append(slot)
        found = peers[slot]
        if found is None:
            raise OSError("connection refused")
        return MemberFigures(found, frozenset({f"conn-of-{slot}"}))

    def backlogs() -> list[tuple[SubscriptionRecord, int, int]]:
        backlog_reads.append(1)
        return []

    sampler = ConsoleSampler(
        service,  # type: ignore[arg-type]  # the reads the sampler makes
        backlogs, interval=10, window=100,
        peers=lambda: [(s, f"http://member:{s}") for s in peers], fetch=fetch, clock=lambda: float(next(clock)),
    )
    return sampler, asked, backlog_reads


def test_unwatched_it_samples_this_member_s_counters_only() -> None:
    service = _Service(slot=None)
    sampler, asked, backlog_reads = _sampler(service, {1: {("published", "t", ""): 100}})
    for n in (0, 50, 150):
        service.values[("published", "t", "")] = n
        sampler.sample()
    assert asked == [] and backlog_reads == []  # nobody watches: no request to a member or the store
    assert sampler.rates("published:t") == [(10.0, 5.0), (20.0, 10.0)]
    assert sampler.latest_rate("published:t") == 10.0


def test_watched_it_adds_the_other_members_counters_and_a_member_gone_leaves_no_dip() -> None:
    service = _Service(slot=0)
    peer: dict[CounterKey, int] = {("published", "t", ""): 0, ("delivered", "t", "k"): 7}
    peers: dict[int, dict[CounterKey, int] | None] = {1: peer}
    sampler, asked, backlog_reads = _sampler(service, peers)
    sampler.watched()
    service.values[("published", "t", "")] = 0
    sampler.sample()
    service.values[("published", "t", "")] = 10
    peer[("published", "t", "")] = 40
    sampler.sample()
    assert sampler.latest_rate("published:t") == 5.0  # 1 + 4 msg/s
    assert sampler.counters()[("delivered", "t", "k")] == 7
    assert (sampler.member_of("conn-of-1"), sampler.member_of("elsewhere")) == (1, None)
    peers[1] = None  # killed: its answer never comes
    service.values[("published", "t", "")] = 30
    sampler.sample()
    assert sampler.rates("published:t") == [(10.0, 5.0), (20.0, 2.0)]
    assert ("delivered", "t", "k") not in sampler.counters()  # only what the last sample found
    assert sampler.member_of("conn-of-1") is None
    assert asked == [1, 1, 1] and len(backlog_reads) == 3
