"""A crash run: load on a real ``sharedsub serve``, SIGKILLs at random moments, then the invariants.

:func:`crash_run` creates a topic, starts ``sharedsub serve`` (port 0 the first time, the same
port after every restart, so clients reconnect to one URL), attaches the consumers, starts the
publisher, and then, ``kills`` times, waits a random gap and either

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
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from pathlib import Path

from sharedsub.model import SubscriptionKey
from sharedsub.storage import delta
from tests.crash import invariants
from tests.crash.invariants import Violation
from tests.crash.load import Consumer, Publisher, Recorder
from tests.crash.tables import read_stored
from tests.service import ServeProcess

TOPIC = "crash-orders"
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
            f"counts: {self.counts}; redeliveries: {invariants.redeliveries(self.log)}; "
            f"front-end incarnations: {len(self.log.incarnations)}",
            f"violations ({len(self.violations)}):",
            *[f"  {v}" for v in self.violations[:60]],
        ]
        for name, errors in self.client_errors.items():
            if errors:
                lines.append(f"{name}: {len(errors)} errors, last: {errors[-3:]}")
        return "\n".join(lines)


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


def crash_run(
    data_dir: Path,
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
) -> CrashResult:
    """Run the load and the kills (see the module docstring); never raises on a violation.

    Raises:
        AssertionError: the service did not come back (or start) within ``recovery_timeout``.
    """
    rng = random.Random(seed)
    kinds = schedule(seed, kills, frontend_share)
    late_after = rng.randrange(kills // 4, max(kills // 2, kills // 4 + 1)) if kills else 0
    root = str(data_dir)
    delta.create_topic(root, TOPIC)
    recorder = Recorder()
    started = time.monotonic()
    recorder.new_incarnation()
    serves = [ServeProcess(data_dir).start()]
    url = serves[0].url
    port = int(url.rsplit(":", 1)[1])
    progress(f"serve 0 ready at {url} after {time.monotonic() - started:.1f} s")

    def consumer(subscription: str, link: str, container: str, caps: list[str]) -> Consumer:
        c = Consumer(
            url,
            recorder,
            subscription=subscription,
            topic=TOPIC,
            link=link,
            container=container,
            capabilities=caps,
            incarnation=lambda: recorder.incarnation,
            settle_delay=settle_delay,
        )
        c.start()
        return c

    def delivered() -> int:
        return recorder.counts().get(f"delivered:{DURABLE}", 0)

    clients: list[Consumer | Publisher] = [
        consumer(SHARED, "crash-shared|global", "crash-client-shared-1", ["topic", "shared", "global"]),
        consumer(SHARED, "crash-shared|global2", "crash-client-shared-2", ["topic", "shared", "global"]),
        consumer(DURABLE, "crash-durable", "crash-client-durable", ["topic"]),
    ]
    kill_log: list[Kill] = []
    publisher = Publisher(url, recorder, topic=TOPIC, name="p1", rate=rate)
    try:
        _wait(lambda: len(recorder.snapshot().subscriptions) == 2, 60, "the first subscriptions to attach")
        publisher.start()
        clients.append(publisher)
        _wait(lambda: delivered() > 0, recovery_timeout, "the first delivery")
        for i, kind in enumerate(kinds):
            serve = serves[-1]
            if rng.random() < steady_share:
                # Kill while messages flow end to end rather than while a JVM starts: wait until
                # the server is ready and its current fan-out child reported running.
                _wait(
                    lambda: serve.ready
                    and (child := serve.fanout_pid()) is not None
                    and child in serve.fanout_running_pids(),
                    recovery_timeout,
                    f"the service to run before kill {i + 1} (seed {seed})",
                )
            time.sleep(rng.uniform(*gap))
            if kind == FANOUT:  # right after a restart the child may not exist yet
                _wait(lambda: serve.fanout_pid() is not None, recovery_timeout, f"a fan-out child to kill (kill {i + 1}, seed {seed})")
            before = delivered()
            reported = len(serve.fanout_running_pids())
            at = time.monotonic()
            if kind == FRONTEND:
                pid = serve.pid
                serve.kill()  # SIGKILL, and reaped: this incarnation is dead
                recorder.new_incarnation()
                serve = ServeProcess(data_dir, port=port).start(wait=False)
                serves.append(serve)
            else:
                pid = serve.kill_fanout()
            recovered: float | None = None
            # The next kill may come before the service is back (a kill during recovery); every
            # ``recover_every``-th kill, and the last, waits until it is back and delivering again.
            if (i + 1) % recover_every == 0 or i == len(kinds) - 1:
                what = f"recovery from kill {i + 1} ({kind} pid {pid}, seed {seed})"
                serve.wait_ready(recovery_timeout)
                if kind == FANOUT:
                    _wait(lambda: any(p != pid for p in serve.fanout_running_pids()[reported:]), recovery_timeout, what)
                _wait(lambda: delivered() > before, recovery_timeout, what)
                recovered = time.monotonic() - at
            kill_log.append(Kill(kind, at - started, pid, recovered))
            progress(
                f"kill {i + 1}/{kills}: {kind} pid {pid} at {at - started:.1f} s"
                + (f", back and delivering after {recovered:.1f} s" if recovered is not None else "")
                + f"; {recorder.counts()}"
            )
            if i == late_after:
                clients.append(consumer(LATE, "crash-late", "crash-client-late", ["topic", "shared"]))
        time.sleep(rng.uniform(*gap))
        publisher.finish()
        progress(f"publisher finished at {time.monotonic() - started:.1f} s; draining")

        def draining() -> bool:
            """True while a rule that waiting can still satisfy is broken (the others are final)."""
            found = invariants.check(recorder.snapshot(), read_stored(root, [TOPIC], IDENTITIES))
            return bool(invariants.rules(found) & invariants.EVENTUAL)

        deadline = time.monotonic() + drain_timeout
        while draining() and time.monotonic() < deadline:
            time.sleep(1.0)
        for c in clients:
            c.stop()
        log = recorder.snapshot()
        violations = invariants.check(log, read_stored(root, [TOPIC], IDENTITIES))
        code = serves[-1].stop()
        if code != 0:
            violations.append(Violation("clean-stop", f"sharedsub serve exited with {code} on SIGTERM after the run"))
        progress(f"done at {time.monotonic() - started:.1f} s: {len(violations)} violations")
    finally:
        for c in clients:
            c.stop()
        for serve in serves:
            serve.kill()
        if logs_dir is not None:
            logs_dir.mkdir(parents=True, exist_ok=True)
            for n, serve in enumerate(serves):
                (logs_dir / f"serve-{n}.log").write_text(serve.log())
    return CrashResult(
        seed=seed,
        kills=kill_log,
        violations=violations,
        log=log,
        counts=recorder.counts(),
        client_errors={c.name: c.errors for c in clients},
        duration=time.monotonic() - started,
        serve_log_tail=serves[-1].log()[-6000:],
    )
