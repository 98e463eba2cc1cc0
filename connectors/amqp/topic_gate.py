"""Which topics exist, as the front end's reactor thread sees them, and the topic changes it makes.

One :class:`TopicGate` per front end holds what attaches, publishes and the admin ``topics
drop`` need to agree on:

* a topic is *present* once its table was found (looked up in storage at the first miss:
  topics created while the service runs, by the CLI or another front end, are found then) or
  created here, and stays so until a drop of it begins;
* **creation** (``[server] auto_create_topics``) is queued on the committer once per topic
  however many attaches and publishes ask meanwhile; attaches wait for it
  (:meth:`TopicGate.when_present`), publishes are queued behind it (:meth:`TopicGate.ensure`:
  the committer creates a topic before it appends what was submitted after the creation);
* a **drop** closes the topic first (:meth:`TopicGate.close`: absent for attaches and publishes
  from then on, so no new subscription or message lands on a table about to go), then queues
  the table's removal after whatever the caller queued before it (:meth:`TopicGate.drop`: the
  subscriptions' DELETED revisions) and opens the name again when the removal is done.

Reactor thread only; continuations run on it too (the committer's results come back through
the front end's event injector).
"""

from __future__ import annotations

from collections.abc import Callable

from sharedsub.core.errors import TopicNotFound
from sharedsub.runtime.commit_requests import CreateTopic, DropTopic, Result

Continuation = Callable[[BaseException | None], None]


class TopicGate:
    """Topic presence, creation and drops of one front end (see the module docstring)."""

    def __init__(
        self,
        *,
        auto_create: bool,
        submit: Callable[[CreateTopic | DropTopic], None],
        token: Callable[[Callable[[Result], None]], int],
        in_storage: Callable[[str], bool],
        on_dropped: Callable[[str], None],
    ) -> None:
        """``submit``: the committer's queue; ``token``: registers a result callback and returns
        the token a request carries; ``in_storage``: whether a topic's table exists (storage
        I/O, asked on a miss only); ``on_dropped``: what else forgets a topic once its table is
        gone (the tailer)."""
        self._auto_create = auto_create
        self._submit = submit
        self._token = token
        self._in_storage = in_storage
        self._on_dropped = on_dropped
        self._known: set[str] = set()
        self._closed: set[str] = set()  # being dropped: absent until the drop is done
        self._creating: dict[str, list[Continuation]] = {}

    def exists(self, topic: str) -> bool:
        """True when ``topic`` exists and no drop of it is under way."""
        if topic in self._closed:
            return False
        if topic in self._known:
            return True
        if self._in_storage(topic):
            self._known.add(topic)
            return True
        return False

    def when_present(self, topic: str, then: Continuation) -> None:
        """Run ``then(None)`` once ``topic`` exists (creating it when allowed), else
        ``then(error)``: :class:`TopicNotFound`, or the creation's failure."""
        if self.exists(topic):
            then(None)
            return
        if not self._auto_create:
            then(TopicNotFound(topic))
            return
        self._create(topic).append(then)

    def ensure(self, topic: str) -> None:
        """For a publish about to be queued: nothing when ``topic`` exists; its creation queued
        ahead of the publish when allowed (once); else :class:`TopicNotFound` is raised."""
        if self.exists(topic):
            return
        if not self._auto_create:
            raise TopicNotFound(topic)
        self._create(topic)

    def close(self, topic: str) -> None:
        """A drop of ``topic`` begins: absent for attaches and publishes until :meth:`drop` is done."""
        self._closed.add(topic)
        self._known.discard(topic)

    def drop(self, topic: str, done: Callable[[Result], None]) -> None:
        """Queue the removal of ``topic``'s table (after everything queued before: the
        committer's DropTopic contract); once it is done the name is open again (found in
        storage or created anew) and ``done(result)`` runs."""

        def dropped(result: Result) -> None:
            self._closed.discard(topic)
            self._on_dropped(topic)
            done(result)

        self._submit(DropTopic(topic, self._token(dropped)))

    def _create(self, topic: str) -> list[Continuation]:
        """The continuations waiting for ``topic``'s creation, the creation queued if it is not yet."""
        waiting = self._creating.get(topic)
        if waiting is not None:
            return waiting
        waiting = self._creating[topic] = []

        def created(result: Result) -> None:
            if result.error is None:
                self._known.add(topic)
            for cont in self._creating.pop(topic, []):
                cont(result.error)

        self._submit(CreateTopic(topic, self._token(created)))
        return waiting
