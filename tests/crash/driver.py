"""A crash run: load on a real ``sharedsub serve``, SIGKILLs at random moments, then the invariants.

:func:`crash_run` creates a topic, starts ``sharedsub serve`` (port 0 the first time, the same
port after every restart, so clients reconnect to one URL), attaches the consumers, starts the
publishers (one in bursts, one that waits for each message's outcome), and then, ``kills`` times, waits a random gap and either

* SIGKILLs the front end (``sharedsub serve``; its fan-out child gets its parent-death signal)
  and starts a new ``serve`` on the same data dir; or
* SIGKILLs only the fan-out job (the child's process group); the server must start a new child
  by itself.

A share (``steady_share``) of the kills first waits until the service runs (server ready, fan-out
child reported running), so they land while messages flow end to end: mid-commit, mid-routing,
with deliveries unsettled (consumers hold each for ``settle_delay``) or acks not yet committed.
The others come a random gap after the previous kill, wherever the service is, often in a start-up
(a new front end is not waited for, nor a new fan-out child). Every ``recover_every``-th kill, and
the last, waits until the service is back with no help: ready line, a new fan-out child reported
running (after a fan-out kill) and a subscription receiving messages again. A third subscription
is created after a random kill, so "every message sent after its creation" is exercised. After
the last kill the publisher stops, and the run polls (generous deadline) until the invariants hold
or the deadline passes; the result carries what :func:`tests.crash.invariants.check` says then.

The choices (which process, the gaps, which kills wait, when the third subscription comes) come
from ``seed`` alone; where in its work each process is when it dies depends on the machine too.

:class:`LoadedService` is the service, its clients and the end of a run (drain, check, clean
stop) that :func:`crash_run` and the runs of tests/crash/scenarios.py share.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from sharedsub.core.model import SubscriptionKey
from sharedsub.storage.topics import create_topic
from tests.crash import invariants
from tests.crash.invariants import Violation
from tests.crash.load import Consumer, Publisher, Recorder, _Client
from tests.crash.tables import read_stored
from tests.service import ServeProcess

TOPIC = "crash-orders"
SYNC_RATE = 5.0  # msg/s of the publisher that waits for each outcome (LoadedService.sync_publisher)
FRONTEND = "frontend"
FANOUT = "fanout"

# The subscriptions (the name in the records, as a Qpid JMS client would name them):
SHARED = "shared"  # shared durable, global: two consumers on two connections
DURABLE = "durable"  # unshared durable (needs a client id)
LATE = "late"  # shared durable with one consumer, created mid-run
IDENTITIES = {
    SHARED: SubscriptionKey("global", "crash-shared", shared=True, durable=True),
    DURABLE: SubscriptionKey("crash-client-durable", "crash-durable", shared=False, durable=True),
    LATE: SubscriptionKey("crash-client-late", "crash-late", shared=True, durable=True),
}


@dataclasses.dataclass(frozen=True, slots=True)
class Kill:
    """One SIGKILL: what, when (seconds into the run), of which pid, and how long until the service
    was back and delivering (None when the run went on without waiting)."""

    kind: str
    at: float
    pid: int
    recovered_after: float | None


@dataclasses.dataclass
class CrashResult:
    """What a run saw and what the checker says."""

    seed: int
    kills: list[Kill]
    violations: list[Violation]
    log: invariants.ClientLog
    counts: dict[str, int]
    client_errors: dict[str, list[str]]
    duration: float
    serve_log_tail: str

    def report(self) -> str:
        """Seed, kills, counts and violations, for a failure message."""
        lines = [
            f"seed {self.seed} (rerun with SHAREDSUB_CRASH_SEED={self.seed}); {len(self.kills)} kills in {self.duration:.0f} s",
            "kills: "
            + ", ".join(
                f"{k.kind}@{k.at:.1f}" + (f"(back in {k.recovered_after:.1f}s)" if k.recovered_after is not None else "")
                for k in self.kills
            ),
            f"counts: {self.counts}; redeliveries: {_summary(invariants.redeliveries(self.log))}; "
            f"front-end incarnations: {len(self.log.incarnations)}",
            f"violations ({len(self.violations)}):",
            *[f"  {v}" for v in self.violations[:60]],
        ]
        for name, errors in self.client_errors.items():
            if errors:
                lines.append(f"{name}: {len(errors)} errors, last: {errors[-3:]}")
        return "\n".join(lines)


def _summary(per_subscription: dict[str, int], most: int = 10) -> str:
    """Counts per subscription, in full for a few subscriptions, summed for many."""
    if len(per_subscription) <= most:
        return str(per_subscription)
    return f"{sum(per_subscription.values())} to {len(per_subscription)} subscriptions"


def seed_for(what: str) -> int:
    """The run's seed: ``SHAREDSUB_CRASH_SEED`` (to replay a run), else a fresh one; printed."""
    seed = int(os.environ.get("SHAREDSUB_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"{what} seed {seed}")
    return seed


def passed(result: CrashResult) -> str:
    """The report, printed; fails the test with it and the serve log tail when a rule broke."""
    report = result.report()
    print(report)
    assert not result.violations, f"{report}\n--- serve log tail ---\n{result.serve_log_tail}"
    return report


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll until ``predicate``; return the seconds it took (AssertionError after ``timeout``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def schedule(seed: int, kills: int, frontend_share: float) -> list[str]:
    """Which process each kill hits: ``round(kills * frontend_share)`` front-end kills, shuffled."""
    n_front = round(kills * frontend_share)
    kinds = [FRONTEND] * n_front + [FANOUT] * (kills - n_front)
    random.Random(seed).shuffle(kinds)
    return kinds


class LoadedService:
    """``sharedsub serve`` on one data dir under the crash load, across its restarts.

    :meth:`start` creates the topic, starts the first ``serve`` (port 0; every restart reuses the
    port, so clients reconnect to one URL), attaches the shared and the unshared durable
    subscription's consumers and starts the publisher. :meth:`kill_frontend` and
    :meth:`kill_fanout` crash the service, :meth:`wait_recovered` waits until it is back and
    delivering, :meth:`finish` ends the run: the publisher stops, the run polls until the
    invariants hold or ``drain_timeout`` passes, the clients stop, the invariants are checked
    and the last ``serve`` must stop cleanly on SIGTERM. :meth:`close` (always) kills what is
    left and writes every incarnation's log to ``logs_dir``. Every wait is bounded and fails
    with an AssertionError naming what it waited for and the seed.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        seed: int,
        env: dict[str, str] | None = None,
        rate: float = 10.0,
        settle_delay: float = 0.3,
        durable_settle_delay: float | None = None,
        recovery_timeout: float = 240.0,
        logs_dir: Path | None = None,
        progress: Callable[[str], None] = lambda _line: None,
    ) -> None:
        # A data-dir location: a local path or an s3:// URI (its AWS variables in ``env`` and in
        # this process, which reads the tables through sharedsub.storage).
        self.data_dir, self.root = data_dir, str(data_dir)
        self.seed = seed
        self.env = env or {}
        self.rate, self.settle_delay = rate, settle_delay
        # The unshared durable subscription's consumer holds each delivery this long (default: as the others).
        self.durable_settle_delay = settle_delay if durable_settle_delay is None else durable_settle_delay
        self.recovery_timeout = recovery_timeout
        self.logs_dir = logs_dir
        self.progress = progress
        self.recorder = Recorder()
        self.serves: list[ServeProcess] = []
        self.clients: list[_Client] = []
        self.kills: list[Kill] = []
        self.started = time.monotonic()
        self.url = ""
        self.port = 0
        self.publisher: Publisher | None = None
        # One message at a time, as a JMS synchronous send: each is committed alone, and the
        # append child makes the next commit's files ahead after answering it
        # (sharedsub.storage.delta.prepared_commit), so kills land between commits that left
        # made-ahead files behind, and the next incarnation writes beside them.
        self.sync_publisher: Publisher | None = None
        self.log: invariants.ClientLog | None = None
        self.violations: list[Violation] = []

    @property
    def serve(self) -> ServeProcess:
        """The current incarnation's process."""
        return self.serves[-1]

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def start_first_serve(self) -> None:
        """The run's clock, its topic and its first ``serve`` (its URL and port kept: every
        restart listens there again)."""
        self.started = time.monotonic()
        create_topic(self.root, TOPIC)
        self.recorder.new_incarnation()
        self.serves.append(ServeProcess(self.data_dir, env=self.env).start())
        self.url = self.serve.url
        self.port = int(self.url.rsplit(":", 1)[1])
        self.progress(f"serve 0 ready at {self.url} after {self.elapsed():.1f} s")

    def delivered(self, subscription: str = DURABLE) -> int:
        """Deliveries recorded so far for ``subscription``."""
        return self.recorder.counts().get(f"delivered:{subscription}", 0)

    def start(self) -> None:
        """Topic, first ``serve``, consumers and publisher; returns once a message was delivered."""
        self.start_first_serve()
        self.clients += [
            self._consumer(SHARED, "crash-shared|global", "crash-client-shared-1", ["topic", "shared", "global"]),
            self._consumer(SHARED, "crash-shared|global2", "crash-client-shared-2", ["topic", "shared", "global"]),
            self._consumer(DURABLE, "crash-durable", "crash-client-durable", ["topic"]),
        ]
        _wait(lambda: len(self.recorder.snapshot().subscriptions) == 2, 60, "the first subscriptions to attach")
        self.publisher = Publisher(self.url, self.recorder, topic=TOPIC, name="p1", rate=self.rate)
        self.publisher.start()
        self.clients.append(self.publisher)
        self.sync_publisher = Publisher(self.url, self.recorder, topic=TOPIC, name="p2", rate=SYNC_RATE, burst=1, window=1)
        self.sync_publisher.start()
        self.clients.append(self.sync_publisher)
        _wait(lambda: self.delivered() > 0, self.recovery_timeout, "the first delivery")

    def _consumer(self, subscription: str, link: str, container: str, caps: list[str]) -> Consumer:
        c = Consumer(
            self.url,
            self.recorder,
            subscription=subscription,
            topic=TOPIC,
            link=link,
            container=container,
            capabilities=caps,
            incarnation=lambda: self.recorder.incarnation,
            settle_delay=self.durable_settle_delay if subscription == DURABLE else self.settle_delay,
        )
        c.start()
        return c

    def add_late(self) -> None:
        """Create the third subscription (LATE) by attaching its consumer now."""
        self.clients.append(self._consumer(LATE, "crash-late", "crash-client-late", ["topic", "shared"]))

    def wait_running(self, what: str) -> float:
        """Wait until the server is ready and its current fan-out child reported running."""
        serve = self.serve
        return _wait(
            lambda: serve.ready and (child := serve.fanout_pid()) is not None and child in serve.fanout_running_pids(),
            self.recovery_timeout,
            f"{what} (seed {self.seed})",
        )

    def kill_frontend(self) -> int:
        """SIGKILL the front end (reaped: its incarnation is dead) and start the next one at once,
        without waiting for it; return the dead one's pid."""
        serve = self.serve
        pid = serve.pid
        serve.kill()
        self.recorder.new_incarnation()
        self.serves.append(ServeProcess(self.data_dir, port=self.port, env=self.env).start(wait=False))
        return pid

    def kill_fanout(self, what: str) -> int:
        """SIGKILL the fan-out job (waiting for a child to exist first); return its pid."""
        serve = self.serve
        _wait(
            lambda: serve.fanout_pid() is not None, self.recovery_timeout, f"a fan-out child to kill ({what}, seed {self.seed})"
        )
        return serve.kill_fanout()

    def wait_recovered(
        self, kind: str, pid: int, before: int, reported: int, what: str, ready_timeout: float | None = None
    ) -> float:
        """Wait until the service is back after a kill of ``kind`` (pid ``pid``): ready line
        (within ``ready_timeout``, default the recovery timeout), a new fan-out child reported
        running after a fan-out kill (``reported``: how many the log named before it), and
        deliveries beyond ``before``. Return the seconds it took from now."""
        serve = self.serve
        start = time.monotonic()
        try:
            serve.wait_ready(self.recovery_timeout if ready_timeout is None else ready_timeout)
        except RuntimeError as exc:
            raise AssertionError(f"{what} (seed {self.seed}): {exc}") from None
        if kind == FANOUT:
            _wait(lambda: any(p != pid for p in serve.fanout_running_pids()[reported:]), self.recovery_timeout, what)
        _wait(lambda: self.delivered() > before, self.recovery_timeout, what)
        return time.monotonic() - start

    def record_kill(
        self, kind: str, at: float, pid: int, recovered: float | None, *, total: int | None = None, note: str = ""
    ) -> None:
        """Add a kill to the run's list and report it (``note`` says where it landed)."""
        self.kills.append(Kill(kind, at - self.started, pid, recovered))
        self.progress(
            f"kill {len(self.kills)}{f'/{total}' if total else ''}: {kind} pid {pid} at {at - self.started:.1f} s{note}"
            + (f", back and delivering after {recovered:.1f} s" if recovered is not None else "")
            + f"; {self.recorder.counts()}"
        )

    def stored(self) -> invariants.Stored:
        """What the tables hold now (read-only; the service may be running)."""
        return read_stored(self.root, [TOPIC], IDENTITIES)

    def finish(self, drain_timeout: float, before_stop: Callable[[], list[Violation]] | None = None) -> list[Violation]:
        """Stop publishing, wait (at most ``drain_timeout``) until no rule that waiting can still
        satisfy is broken, stop the clients, check; ``before_stop`` adds checks that need the
        running service; then the last ``serve`` must stop cleanly on SIGTERM."""
        assert self.publisher is not None
        self.publisher.finish()
        if self.sync_publisher is not None:
            self.sync_publisher.finish()
        self.progress(f"publisher finished at {self.elapsed():.1f} s; draining")

        def draining() -> bool:
            """True while a rule that waiting can still satisfy is broken (the others are final)."""
            found = invariants.check(self.recorder.snapshot(), self.stored())
            return bool(invariants.rules(found) & invariants.EVENTUAL)

        deadline = time.monotonic() + drain_timeout
        while draining() and time.monotonic() < deadline:
            time.sleep(1.0)
        for c in self.clients:
            c.stop()
        self.log = self.recorder.snapshot()
        return self.conclude(invariants.check(self.log, self.stored()), before_stop)

    def conclude(self, violations: list[Violation], before_stop: Callable[[], list[Violation]] | None) -> list[Violation]:
        """The end of :meth:`finish` once the clients stopped and ``violations`` were found:
        ``before_stop``'s too, then a clean stop of serve (a violation when it fails)."""
        if before_stop is not None:
            violations += before_stop()
        code = self.serve.stop()
        if code != 0:
            violations.append(Violation("clean-stop", f"sharedsub serve exited with {code} on SIGTERM after the run"))
        self.violations = violations
        self.progress(f"done at {self.elapsed():.1f} s: {len(violations)} violations")
        return violations

    def close(self) -> None:
        """Stop the clients, kill every incarnation still alive, write the logs (if asked to)."""
        for c in self.clients:
            c.stop()
        for serve in self.serves:
            serve.kill()
        if self.logs_dir is not None:
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            for n, serve in enumerate(self.serves):
                (self.logs_dir / f"serve-{n}.log").write_text(serve.log())

    def result(self) -> CrashResult:
        """The run's :class:`CrashResult` (after :meth:`finish`)."""
        assert self.log is not None
        return CrashResult(
            seed=self.seed,
            kills=self.kills,
            violations=self.violations,
            log=self.log,
            counts=self.recorder.counts(),
            client_errors={c.name: c.errors for c in self.clients},
            duration=self.elapsed(),
            serve_log_tail=self.serve.log()[-6000:],
        )


def crash_run(
    data_dir: Path | str,
    *,
    seed: int,
    kills: int,
    frontend_share: float = 0.65,  # of the kills, the share that hits the front end
    rate: float = 10.0,
    settle_delay: float = 0.3,
    gap: tuple[float, float] = (0.5, 6.0),
    steady_share: float = 0.4,  # of the kills, the share that waits for the service to run first
    recover_every: int = 8,
    recovery_timeout: float = 240.0,
    drain_timeout: float = 180.0,
    logs_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    env: dict[str, str] | None = None,
) -> CrashResult:
    """Run the load and the kills (see the module docstring); never raises on a violation.
    ``data_dir``: a local path or an ``s3://`` URI; ``env``: added to every ``serve``'s environment.

    Raises:
        AssertionError: the service did not come back (or start) within ``recovery_timeout``.
    """
    rng = random.Random(seed)
    kinds = schedule(seed, kills, frontend_share)
    late_after = rng.randrange(kills // 4, max(kills // 2, kills // 4 + 1)) if kills else 0
    run = LoadedService(
        data_dir,
        seed=seed,
        rate=rate,
        settle_delay=settle_delay,
        recovery_timeout=recovery_timeout,
        logs_dir=logs_dir,
        progress=progress,
        env=env,
    )
    try:
        run.start()
        for i, kind in enumerate(kinds):
            if rng.random() < steady_share:
                # Kill while messages flow end to end rather than while a JVM starts: wait until
                # the server is ready and its current fan-out child reported running.
                run.wait_running(f"the service to run before kill {i + 1}")
            time.sleep(rng.uniform(*gap))
            what = f"kill {i + 1}"
            if kind == FANOUT:  # right after a restart the child may not exist yet
                _wait(
                    lambda: run.serve.fanout_pid() is not None, recovery_timeout, f"a fan-out child to kill ({what}, seed {seed})"
                )
            before = run.delivered()
            reported = len(run.serve.fanout_running_pids())
            at = time.monotonic()
            pid = run.kill_frontend() if kind == FRONTEND else run.kill_fanout(what)
            recovered: float | None = None
            # The next kill may come before the service is back (a kill during recovery); every
            # ``recover_every``-th kill, and the last, waits until it is back and delivering again.
            if (i + 1) % recover_every == 0 or i == len(kinds) - 1:
                run.wait_recovered(kind, pid, before, reported, f"recovery from kill {i + 1} ({kind} pid {pid}, seed {seed})")
                recovered = time.monotonic() - at
            run.record_kill(kind, at, pid, recovered, total=kills)
            if i == late_after:
                run.add_late()
        time.sleep(rng.uniform(*gap))
        run.finish(drain_timeout)
    finally:
        run.close()
    return run.result()
