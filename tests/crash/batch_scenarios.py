"""Crash runs aimed at the middle of a fan-out micro-batch that commits hundreds of tables.

:func:`mid_batch_run` loads one topic with :data:`SUBSCRIPTIONS` unshared durable subscriptions,
each with the selector ``k = i % KEYS`` (so every message matches :data:`SUBSCRIPTIONS` / :data:`KEYS`
of them), attached on a few connections (:class:`~tests.crash.durable_links.DurableLinks`) and
consumed throughout, and publishes bursts of :data:`KEYS` messages whose property ``k`` runs
through every key, so a micro-batch routes to every subscription table, one commit each. Then,
``kills`` times, it waits for a batch newer than the last one it killed to have committed some
tables and not all (:class:`~tests.crash.batch_watch.BatchWatch` reads the tables' logs; the
threshold is drawn from the seed; the job is stepped, SIGSTOPped while its tables are read, so
the kill lands where they were seen) and SIGKILLs either ``sharedsub serve`` (its fan-out child dies
with it; the next ``serve`` starts at once, on the same port) or only the fan-out job (serve
starts a new one), records where the batch stood once the killed job was dead, and waits until
the service is back and delivering. After the last kill the publisher stops, every subscription
is drained (until each has every matching accepted message, or the drain timeout), and the
invariants of tests/crash/invariants.py are checked: nothing lost, nothing twice unless marked
redelivered, each table holding each matching seq once. Last, each kill's tables are read again
(:func:`~tests.crash.batch_watch.mid_batch`) to say whether it really came mid-batch: the result
carries that verdict per kill, for the test to assert on.

All choices come from ``seed`` (thresholds, gaps); where the job is when it dies depends on the
machine too. Every wait is bounded and fails naming what it waited for and the seed.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

from sharedsub.core import layout
from sharedsub.core.model import SubscriptionKey
from sharedsub.runtime.commit_wake import wake_address
from sharedsub.storage.catalog import load_catalog
from tests.crash import invariants
from tests.crash.batch_watch import AtKill, BatchWatch, MidBatch, batch_topic_rows, mid_batch
from tests.crash.driver import FANOUT, FRONTEND, TOPIC, CrashResult, Kill, LoadedService, _wait
from tests.crash.durable_links import DurableLinks
from tests.crash.invariants import Violation
from tests.crash.load import Publisher
from tests.crash.tables import read_stored
from tests.service import _alive

SUBSCRIPTIONS = 300
KEYS = 100  # distinct values of property ``k``: each message matches SUBSCRIPTIONS // KEYS subscriptions
CONNECTIONS = 3  # client ids, each holding SUBSCRIPTIONS // CONNECTIONS links
CLIENT = "batch-client"
STEP_RUN = 0.1  # seconds the fan-out job runs between two looks at its tables while a kill waits


def subscription_name(i: int) -> str:
    """The name (link name) of subscription ``i``."""
    return f"batch-sub-{i:03d}"


def selector(i: int) -> str:
    """Subscription ``i``'s selector."""
    return f"k = {i % KEYS}"


def identities() -> dict[str, SubscriptionKey]:
    """Every subscription's identity, by name: unshared durable, under its connection's client id."""
    per = SUBSCRIPTIONS // CONNECTIONS
    return {
        subscription_name(i): SubscriptionKey(f"{CLIENT}-{i // per}", subscription_name(i), shared=False, durable=True)
        for i in range(SUBSCRIPTIONS)
    }


@dataclasses.dataclass
class BatchCrashResult:
    """A run's :class:`CrashResult`, and where each kill landed (one :class:`MidBatch` per kill)."""

    crash: CrashResult
    landed: list[MidBatch]
    tables: int

    def report(self) -> str:
        return "\n".join(
            [self.crash.report(), f"{self.tables} subscription tables; where each kill landed:"]
            + [f"  kill {n + 1}: {m}" for n, m in enumerate(self.landed)]
        )


class BatchLoad(LoadedService):
    """:class:`LoadedService` with the load of this module instead of the crash load's three
    subscriptions: :meth:`start` attaches the subscriptions and starts the bursts, and the drain
    of :meth:`finish` waits on what the clients recorded before reading the tables."""

    def __init__(
        self,
        data_dir: Path,
        *,
        seed: int,
        rate: float,
        recovery_timeout: float,
        logs_dir: Path | None,
        progress: Callable[[str], None],
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            data_dir, seed=seed, env=env, rate=rate, recovery_timeout=recovery_timeout, logs_dir=logs_dir,
            progress=progress,
        )
        self.identities = identities()
        self.watch: BatchWatch | None = None
        self._reach: dict[int, int] = {}  # batch id -> tables it routes to (reach)

    def delivered(self, subscription: str | None = None) -> int:
        """Deliveries recorded so far (to ``subscription``, or to any)."""
        counts = self.recorder.counts()
        if subscription is not None:
            return counts.get(f"delivered:{subscription}", 0)
        return sum(n for key, n in counts.items() if key.startswith("delivered:"))

    def start(self) -> None:
        """Topic, first ``serve``, the subscriptions' links, the publisher; returns once every
        subscription is attached, its table known, and a message was delivered."""
        self.start_first_serve()
        names = [subscription_name(i) for i in range(SUBSCRIPTIONS)]
        per = SUBSCRIPTIONS // CONNECTIONS
        for c in range(CONNECTIONS):
            links = DurableLinks(
                self.url,
                self.recorder,
                client_id=f"{CLIENT}-{c}",
                topic=TOPIC,
                subscriptions=[(names[i], selector(i)) for i in range(c * per, (c + 1) * per)],
                incarnation=lambda: self.recorder.incarnation,
            )
            links.start()
            self.clients.append(links)
        _wait(
            lambda: len(self.recorder.snapshot().subscriptions) == SUBSCRIPTIONS,
            120,
            f"{SUBSCRIPTIONS} subscriptions to attach (seed {self.seed})",
        )
        self.progress(f"{SUBSCRIPTIONS} subscriptions attached after {self.elapsed():.1f} s")
        keys = {identity.key for identity in self.identities.values()}
        records = [r for r in load_catalog(self.root).values() if r.key in keys]
        self.watch = BatchWatch([layout.join(self.root, r.table) for r in records])
        # A burst is one value of ``k`` per key, so that a micro-batch routes to every table;
        # the window holds two bursts, so a burst is not cut in two waiting for settlements.
        self.publisher = Publisher(
            self.url,
            self.recorder,
            topic=TOPIC,
            name="p1",
            rate=self.rate,
            burst=KEYS,
            window=2 * KEYS,
            properties=lambda n: {"k": n % KEYS},
        )
        self.publisher.start()
        self.clients.append(self.publisher)
        _wait(lambda: self.delivered() > 0, self.recovery_timeout, f"the first delivery (seed {self.seed})")

    def stored(self) -> invariants.Stored:
        return read_stored(self.root, [TOPIC], self.identities)

    def finish(self, drain_timeout: float, before_stop: Callable[[], list[Violation]] | None = None) -> list[Violation]:
        """Stop publishing; wait (at most ``drain_timeout``) until every subscription received
        every matching accepted message and the rules that waiting can still satisfy hold; stop
        the clients, check, and stop the last ``serve`` with SIGTERM (it must exit cleanly)."""
        assert self.publisher is not None
        self.publisher.finish()
        self.progress(f"publisher finished at {self.elapsed():.1f} s; draining")
        deadline = time.monotonic() + drain_timeout
        while invariants.check_complete(self.recorder.snapshot()) and time.monotonic() < deadline:
            time.sleep(1.0)
        self.progress(f"drained at {self.elapsed():.1f} s; reading the tables")
        for c in self.clients:
            c.stop()
        self.log = self.recorder.snapshot()
        while True:
            # Reading hundreds of tables takes seconds: read again only while the acks of the
            # last deliveries may still be on their way to the ack logs.
            violations = invariants.check(self.log, self.stored())
            if not invariants.rules(violations) & invariants.EVENTUAL or time.monotonic() > deadline:
                break
            time.sleep(2.0)
        return self.conclude(violations, before_stop)

    def result(self) -> CrashResult:
        """As :meth:`LoadedService.result`, the deliveries summed over the subscriptions (the
        fewest to one subscription named too), so that the report stays readable."""
        out = super().result()
        per = {k: n for k, n in out.counts.items() if k.startswith("delivered:")}
        counts = {k: n for k, n in out.counts.items() if k not in per}
        counts["delivered"] = sum(per.values())
        counts["fewest delivered to one subscription"] = min(per.values(), default=0)
        return dataclasses.replace(out, counts=counts)

    def record_kill(
        self, kind: str, at: float, pid: int, recovered: float | None, *, total: int | None = None, note: str = ""
    ) -> None:
        """Add a kill to the run's list and report it, with the publishes and deliveries so far."""
        self.kills.append(Kill(kind, at - self.started, pid, recovered))
        counts = self.recorder.counts()
        self.progress(
            f"kill {len(self.kills)}{f'/{total}' if total else ''}: {kind} pid {pid} at {at - self.started:.1f} s{note}"
            + (f", back and delivering after {recovered:.1f} s" if recovered is not None else "")
            + f"; {counts.get('accepted', 0)} accepted, {self.delivered()} delivered"
        )

    def reach(self, batch: int) -> int | None:
        """How many subscription tables micro-batch ``batch`` routes to: :data:`SUBSCRIPTIONS` //
        :data:`KEYS` per distinct ``k`` among its topic rows (read from the job's offsets log, see
        :func:`~tests.crash.batch_watch.batch_topic_rows`); None when its offset is not logged."""
        if batch not in self._reach:
            rows = batch_topic_rows(self.root, batch, ["application_properties"])
            if rows is None:
                return None
            keys = {
                value["long"]
                for props in rows.column("application_properties").to_pylist()
                for name, value in props or ()
                if name == "k" and value is not None
            }
            self._reach[batch] = len(keys) * (SUBSCRIPTIONS // KEYS)
        return self._reach[batch]

    def await_mid_batch(self, after: int, share: float, timeout: float) -> tuple[int, int, int] | None:
        """Step the fan-out job until a batch newer than ``after`` holds at least ``share`` of the
        tables and not all; return ``(batch, tables holding it, the job's pid)`` with the job
        *stopped* (SIGSTOP to its process group), so the kill that follows lands exactly where
        the tables were seen. None, the job running, after ``timeout``.

        ``share`` is of the tables the batch routes to (:meth:`reach`), not of all: the front end
        may commit a burst in two group commits and the job route them in two batches, each to
        fewer tables (seen in CI: batches of 35 and 65 messages, 105 and 195 tables), and a batch
        whole in its 105 tables is not mid-batch however few of 300 that is.

        Why stepping: the watch reads hundreds of logs, and a job that goes on committing while
        they are read (or between the read and the kill) may finish the batch first: seen in
        runs of a loaded machine, where 34 tables held the batch when it was seen and all 300 once
        the job was dead. Frozen, the job cannot move while its tables are read; it runs for
        :data:`STEP_RUN` between looks.
        """
        assert self.watch is not None
        n = len(self.watch.tables)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            child = self.serve.fanout_pid()
            if child is None:
                time.sleep(STEP_RUN)
                continue
            try:
                os.killpg(child, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            found = False
            try:
                self.watch.poll()
                batch, holding = self.watch.progress()
                reach = min(n, self.reach(batch) or n) if batch > after else n
                found = batch > after and max(1, round(share * reach)) <= holding < reach
            finally:
                if not found:
                    _resume(child)
            if found:
                return batch, holding, child
            time.sleep(STEP_RUN)
        return None


def _resume(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def _wait_dead(pid: int, what: str) -> None:
    _wait(lambda: not _alive(pid), 30, what)


def mid_batch_run(
    data_dir: Path,
    *,
    seed: int,
    kind: str,
    kills: int,
    rate: float = 20.0,  # messages a second: a burst of KEYS every KEYS / rate seconds
    share: tuple[float, float] = (0.05, 0.7),  # of the tables: where in a batch a kill may come
    find_timeout: float = 60.0,
    recovery_timeout: float = 240.0,
    drain_timeout: float = 120.0,
    logs_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    env: dict[str, str] | None = None,
    before_stop: Callable[[BatchLoad], list[Violation]] | None = None,
) -> BatchCrashResult:
    """Run the load and ``kills`` kills of ``kind`` (FRONTEND: ``serve``; FANOUT: its fan-out job)
    in the middle of fan-out batches, then the invariants (module docstring); never raises on a
    violation. A kill that found no batch in progress within ``find_timeout`` comes anyway (its
    verdict then says where it landed). ``env`` is added to every ``serve``'s environment;
    ``before_stop`` checks the running service once the invariants were read (its violations join
    theirs).

    Raises:
        AssertionError: the service did not come back (or start) within ``recovery_timeout``.
    """
    assert kind in (FRONTEND, FANOUT), kind
    rng = random.Random(seed)
    run = BatchLoad(
        data_dir, seed=seed, rate=rate, recovery_timeout=recovery_timeout, logs_dir=logs_dir, progress=progress, env=env
    )
    at_kills: list[AtKill] = []
    try:
        run.start()
        assert run.watch is not None
        last = -1
        for i in range(kills):
            what = f"kill {i + 1} ({kind}, seed {seed})"
            run.wait_running(f"the service to run before {what}")
            reported = len(run.serve.fanout_running_pids())
            found = run.await_mid_batch(last, rng.uniform(*share), find_timeout)
            at = time.monotonic()  # the kill comes first, the bookkeeping after it
            child = found[2] if found else run.serve.fanout_pid()
            try:
                if kind == FRONTEND:
                    pid = run.kill_frontend()
                    if child is not None:  # its parent-death signal (SIGKILL) kills it, stopped or not
                        _wait_dead(child, f"the fan-out child {child} to die with serve ({what})")
                else:
                    pid = run.kill_fanout(what)
            finally:
                if child is not None:
                    _resume(child)  # a no-op once it is dead; lets it run if the kill failed
            before = run.delivered()
            at_kill = run.watch.at_kill()
            at_kills.append(at_kill)
            last = max(last, at_kill.batch)
            run.wait_recovered(kind, pid, before, reported, f"recovery from {what}")
            seen = f"batch {found[0]} seen in {found[1]} tables" if found else "no batch seen in progress"
            run.record_kill(
                kind,
                at,
                pid,
                time.monotonic() - at,
                total=kills,
                note=f" ({seen}; once dead: batch {at_kill.batch} in {len(at_kill.holding)} of {len(at_kill.versions)})",
            )
            time.sleep(rng.uniform(0.0, 1.0))
        run.finish(drain_timeout, (lambda: before_stop(run)) if before_stop is not None else None)
    finally:
        run.close()
    landed = [mid_batch(a) for a in at_kills]
    for n, m in enumerate(landed):
        progress(f"kill {n + 1}: {m}")
    return BatchCrashResult(run.result(), landed, len(run.watch.tables) if run.watch else 0)


def commit_listener_violations(run: BatchLoad) -> list[Violation]:
    """With ``[fanout] start_on_commit``: the running fan-out job (a process of its group) holds
    the data dir's commit-signal socket (sharedsub.runtime.commit_wake). A killed job's listener
    left bound would keep the new job's from binding, and its batches would then start only at
    the end of each hold; nothing of it shows in the invariants."""
    job = run.serve.fanout_pid()
    if job is None:
        return [Violation("commit-signal", "no fan-out job running at the end of the run")]
    holders = commit_listener_pids(run.root)
    if not holders:
        return [Violation("commit-signal", f"nobody listens for the commit signal of {run.root} (job {job})")]
    strays = [pid for pid in holders if _process_group(pid) != job]
    if strays:
        return [Violation("commit-signal", f"the commit signal is held by {strays}, not by the job {job}'s group")]
    return []


def commit_listener_pids(data_dir: str) -> set[int]:
    """PIDs with a socket bound to ``data_dir``'s abstract commit-signal name (/proc/net/unix)."""
    name = "@" + wake_address(data_dir)[1:].decode("ascii")
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == name:
            inodes.add(f"socket:[{fields[6]}]")
    pids = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            links = {os.readlink(fd) for fd in fd_dir.iterdir()}
        except OSError:  # gone, or not ours to read
            continue
        if links & inodes:
            pids.add(int(fd_dir.parent.name))
    return pids


def _process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
