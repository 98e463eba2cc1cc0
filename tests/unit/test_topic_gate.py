"""connectors.amqp.topic_gate: presence, one creation per topic, drops that close the name first.

The gate is driven here with the committer's queue replaced by a list (what was queued, in
order) and results delivered by hand; the real committer and front end run it in
tests/e2e (auto-created topics, ``topics drop``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from connectors.amqp.topic_gate import TopicGate
from sharedsub.core.errors import TopicNotFound
from sharedsub.runtime.commit_requests import CreateTopic, DropTopic, Result


class Harness:
    def __init__(self, *, auto_create: bool = True, stored: set[str] | None = None) -> None:
        self.stored = set(stored or ())
        self.lookups: list[str] = []
        self.queued: list[CreateTopic | DropTopic] = []
        self.callbacks: dict[int, Callable[[Result], None]] = {}
        self.forgotten: list[str] = []
        self.gate = TopicGate(
            auto_create=auto_create,
            submit=self.queued.append,
            token=self._token,
            in_storage=self._in_storage,
            on_dropped=self.forgotten.append,
        )

    def _token(self, fn: Callable[[Result], None]) -> int:
        self.callbacks[len(self.callbacks) + 1] = fn
        return len(self.callbacks)

    def _in_storage(self, topic: str) -> bool:
        self.lookups.append(topic)
        return topic in self.stored

    def answer(self, index: int, error: BaseException | None = None) -> None:
        request = self.queued[index]
        self.callbacks.pop(request.token)(Result(request, error))


def test_a_stored_topic_is_looked_up_once() -> None:
    h = Harness(stored={"t"})
    assert h.gate.exists("t") and h.gate.exists("t")
    assert h.lookups == ["t"]
    assert not h.gate.exists("u") and not h.gate.exists("u")
    assert h.lookups == ["t", "u", "u"]  # a missing topic is asked again: it may be created meanwhile


def test_without_auto_create_a_missing_topic_is_refused() -> None:
    h = Harness(auto_create=False)
    errors: list[BaseException | None] = []
    h.gate.when_present("t", errors.append)
    assert isinstance(errors[0], TopicNotFound)
    with pytest.raises(TopicNotFound):
        h.gate.ensure("t")
    assert h.queued == []


def test_one_creation_however_many_ask_and_every_waiter_hears() -> None:
    h = Harness()
    heard: list[tuple[str, BaseException | None]] = []
    h.gate.when_present("t", lambda e: heard.append(("a", e)))
    h.gate.ensure("t")  # a publish meanwhile: queued behind the same creation
    h.gate.when_present("t", lambda e: heard.append(("b", e)))
    assert [type(r) for r in h.queued] == [CreateTopic]
    h.answer(0)
    assert heard == [("a", None), ("b", None)]
    assert h.gate.exists("t") and h.lookups.count("t") == 3  # known from now on: no lookup
    h.gate.ensure("t")
    assert len(h.queued) == 1


def test_a_failed_creation_is_told_to_the_waiters_and_tried_again_next_time() -> None:
    h = Harness()
    heard: list[BaseException | None] = []
    h.gate.when_present("t", heard.append)
    failure = OSError("no space")
    h.answer(0, failure)
    assert heard == [failure] and not h.gate.exists("t")
    h.gate.ensure("t")
    assert [type(r) for r in h.queued] == [CreateTopic, CreateTopic]


def test_a_drop_closes_the_name_until_the_table_is_gone() -> None:
    h = Harness(stored={"t"})
    assert h.gate.exists("t")
    h.gate.close("t")
    assert not h.gate.exists("t")  # even though its table is still there
    results: list[Result] = []
    h.gate.drop("t", results.append)
    assert [type(r) for r in h.queued] == [DropTopic] and h.forgotten == []
    assert not h.gate.exists("t")
    h.stored.discard("t")
    h.answer(0)
    assert len(results) == 1 and results[0].error is None
    assert h.forgotten == ["t"]
    assert not h.gate.exists("t")  # looked up again: gone
    h.stored.add("t")  # created again (another front end, the CLI)
    assert h.gate.exists("t")
