"""Crash runs aimed at one moment each: a maintenance run, a replay, a restart.

Each builds on :class:`tests.crash.driver.LoadedService` (the same load, subscriptions and
invariants as :func:`tests.crash.driver.crash_run`) and returns a :class:`CrashResult`:

* :func:`maintenance_run` runs ``serve`` with maintenance every two seconds and thresholds low
  enough that every run deletes acknowledged rows, compacts and checkpoints, and SIGKILLs the
  front end while a run is in progress: right after a maintenance commit or checkpoint of the
  chosen kind appeared in the log of the chosen table (:class:`MaintenanceWatch`), plus a short
  random delay; a kill right after a subscription table's delete mostly lands before the delete
  of its acknowledgements.
  Each restart must come up and complete a maintenance run before the next kill; after the load,
  a run that started after the drain must end without errors, no run may fail outright, and
  every table must still be readable.
* :func:`replay_run` asks the running service for replays of a durable subscription (the admin
  endpoint ``sharedsub replay`` calls) and SIGKILLs the front end during them: right after the
  replay's ``replayed`` ack rows were committed (asked again, up to six times, until the kill
  comes before the answer), and at a random moment after the request or while the answered
  replay's messages are being re-delivered; one replay runs undisturbed. Maintenance runs too,
  so replays also append back rows it deleted. A replay cut short is run again, with the same
  start version, once the service is back.
* :func:`restart_run` SIGKILLs the front end under load several times in a row, each time
  right after the previous restart came up or a little later, and requires every restart to
  print its ready line within the fan-out's startup timeout.

All choices come from ``seed``; where in its work each process is when it dies depends on the
machine too. Every wait is bounded and fails naming what it waited for and the seed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharedsub.cli.replay_client import request_replay
from sharedsub.core import layout
from sharedsub.core.config import defaults
from sharedsub.storage.catalog import load_catalog
from sharedsub.storage.delta.commit_log import MAINTENANCE_MARK, latest_version, read_commit
from sharedsub.storage.delta.table_history import history
from sharedsub.storage.delta.table_reads import read_files, read_table
from sharedsub.storage.delta.tables import log_file, table_exists
from tests.crash.driver import (
    DURABLE,
    FRONTEND,
    IDENTITIES,
    SHARED,
    CrashResult,
    LoadedService,
    _wait,
)
from tests.crash.invariants import Replay, Violation
from tests.service import ServeProcess

# Maintenance every 2 s; 5 acknowledged rows are enough for a delete and 2 files for a
# compaction, so every run of a loaded service deletes, compacts and checkpoints. The history
# retention stays at its default: the checker reads every commit's files (routed rows and acks
# that maintenance deleted since), which a vacuum of removed files would take away; vacuum and
# log cleanup still run every time (they find nothing old enough).
MAINTENANCE_ENV = {
    "SHAREDSUB_MAINTENANCE_INTERVAL": "2",
    "SHAREDSUB_MAINTENANCE_MIN_ACKED_ROWS": "5",
    "SHAREDSUB_MAINTENANCE_COMPACT_MIN_FILES": "2",
}
# What a kill during maintenance waits for: a maintenance commit with this mark value (delete of
# acknowledged rows, compaction), a new checkpoint, or the first of any of them; and in which
# table: the shared or the unshared subscription's (its table or ack log), the topic's, any.
MAINTENANCE_TARGETS = ("acknowledged", "compact", "checkpoint", "any")
# How long the durable subscription's consumer holds a delivery before accepting it in this
# scenario: longer than a maintenance interval, so each run finds rows of several fan-out commits
# unacknowledged, in as many files, and compacts them. With the crash load's 0.3 s the run's delete
# of acknowledged rows could leave a single file, and a kill waiting for a compaction of that table
# timed out (CI, seed 539589450; once locally, seed 533802726).
MAINTENANCE_DURABLE_SETTLE = 3.0
MAINTENANCE_WHERE = ("shared", "durable", "topic", "any")
# Startup bound of a restart: [fanout] startup_timeout (default 180 s) is what the fan-out job's
# first start may take from its query's start to its first micro-batch; the margin covers the
# start of serve and of the JVM before it. A slower start is retried by the supervisor and still
# ends in a ready line, but one that needs a retry under this load is a finding.
STARTUP_TIMEOUT = defaults().fanout.startup_timeout
READY_MARGIN = 60.0
_REPORT = re.compile(r"maintenance: Report\((?P<fields>.*)\)\s*$")
_COUNT = re.compile(r"(\w+)=(-?\d+)\b")


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceEvent:
    """A maintenance step seen in a table's log: ``what`` is the commit's mark or ``checkpoint``."""

    what: str
    table: str
    at: float  # monotonic


class MaintenanceWatch:
    """Sees maintenance steps as they land: new commits carrying :data:`commit_log.MAINTENANCE_MARK`
    and new checkpoints in the logs of the topic and subscription tables of a data dir.

    :meth:`reset` forgets what is there; :meth:`poll` returns what appeared since. A replay's
    restore commit carries the mark too (``replay-restore ...``); this scenario runs none.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self._seen: dict[str, set[str]] = {}

    def _tables(self) -> list[str]:
        out = []
        for base in (layout.TOPICS_DIR, layout.SUBSCRIPTIONS_DIR):
            top = os.path.join(self.root, base)
            if not os.path.isdir(top):
                continue
            for name in sorted(os.listdir(top)):
                path = os.path.join(top, name)
                if base == layout.TOPICS_DIR:
                    out.append(path)
                elif os.path.isdir(path):
                    out += [os.path.join(path, g) for g in sorted(os.listdir(path))]
        return out

    def _names(self, table: str) -> set[str]:
        try:
            return set(os.listdir(os.path.join(table, "_delta_log")))
        except OSError:
            return set()

    def reset(self) -> None:
        """Forget every step so far."""
        self._seen = {t: self._names(t) for t in self._tables()}

    def poll(self) -> list[MaintenanceEvent]:
        """The steps that appeared since the last call (or :meth:`reset`)."""
        events = []
        for table in self._tables():
            names = self._names(table)
            if table not in self._seen:  # a table created since: what it holds already is not new
                self._seen[table] = names
                continue
            for name in sorted(names - self._seen[table]):
                if name.endswith(".checkpoint.parquet"):
                    events.append(MaintenanceEvent("checkpoint", table, time.monotonic()))
                elif name.endswith(".json") and name[:-5].isdigit():
                    mark = _commit_mark(log_file(table, int(name[:-5])))
                    if mark is not None:
                        events.append(MaintenanceEvent(mark, table, time.monotonic()))
            self._seen[table] = names
        return events

    def wait(self, target: str, timeout: float, what: str, where: str = "") -> MaintenanceEvent:
        """The next step of kind ``target`` (``any``: the next step at all) in a table whose path
        contains ``where``."""
        found: list[MaintenanceEvent] = []

        def seen() -> bool:
            found.extend(e for e in self.poll() if (target == "any" or e.what == target) and where in e.table)
            return bool(found)

        _wait(seen, timeout, what)
        return found[0]


def _commit_mark(path: str) -> str | None:
    """The maintenance mark of a commit file (None when it has none, or cannot be read yet)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                info = json.loads(line).get("commitInfo") if line.strip() else None
                if info is not None:
                    return info.get(MAINTENANCE_MARK)
    except (OSError, ValueError):
        return None
    return None


def parse_reports(lines: list[str]) -> list[dict[str, int]]:
    """The counts of every maintenance run report among ``lines`` (sharedsub.runtime.maintenance.Report
    as logged), in order; a run that hit a storage fault counts one more error."""
    out = []
    for line in lines:
        match = _REPORT.search(line)
        if match:
            counts = {k: int(v) for k, v in _COUNT.findall(match["fields"])}
            if "storage_fault=" in match["fields"] and "storage_fault=None" not in match["fields"]:
                counts["errors"] = counts.get("errors", 0) + 1
            out.append(counts)
    return out


def maintenance_reports(serve: ServeProcess) -> list[dict[str, int]]:
    """The reports of the maintenance runs ``serve`` completed, in order (from its log)."""
    return parse_reports(list(serve.stderr_lines))


def _unreadable_tables(root: str) -> list[Violation]:
    """``tables-readable``: every Delta table of the data dir reads at its latest version."""
    out = []
    tables = [layout.catalog_table(root)] + [
        t for t in MaintenanceWatch(root)._tables() if table_exists(t)
    ]
    for table in tables:
        try:
            read_table(table)
        except Exception as exc:  # any failure is the finding
            out.append(Violation("tables-readable", f"{table} cannot be read after the run: {exc!r}"))
    return out


def maintenance_run(
    data_dir: Path,
    *,
    seed: int,
    kills: int,
    recovery_timeout: float = 240.0,
    drain_timeout: float = 180.0,
    logs_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> CrashResult:
    """SIGKILL ``serve`` ``kills`` times while a maintenance run is in progress (module docstring)."""
    rng = random.Random(seed)
    # Each kill waits for a different kind of step until every kind had one; the seed picks which
    # kinds (all of them over runs: "any" too, which a fixed order of three kills never reached).
    kinds = list(MAINTENANCE_TARGETS)
    rng.shuffle(kinds)
    targets = [kinds[i % len(kinds)] for i in range(kills)]
    # Acknowledged rows are deleted from subscription tables and ack logs only.
    wheres = [rng.choice(MAINTENANCE_WHERE[:2] if t == "acknowledged" else MAINTENANCE_WHERE) for t in targets]
    paths = {
        "shared": IDENTITIES[SHARED].key,
        "durable": IDENTITIES[DURABLE].key,
        "topic": f"{layout.TOPICS_DIR}/",
        "any": "",
    }
    late_after = rng.randrange(kills) if kills else 0
    run = LoadedService(
        data_dir,
        seed=seed,
        env=MAINTENANCE_ENV,
        durable_settle_delay=MAINTENANCE_DURABLE_SETTLE,
        recovery_timeout=recovery_timeout,
        logs_dir=logs_dir,
        progress=progress,
    )
    watch = MaintenanceWatch(run.root)
    try:
        run.start()
        for i, target in enumerate(targets):
            serve = run.serve
            run.wait_running(f"the service to run before kill {i + 1}")
            # The previous kill cut a run short: this incarnation must complete one (it cleans up
            # whatever that kill left) before it is killed in turn.
            _wait(
                lambda serve=serve: bool(maintenance_reports(serve)),
                120,
                f"incarnation {len(run.serves) - 1} to complete a maintenance run (seed {seed})",
            )
            watch.reset()
            event = watch.wait(
                target,
                120,
                f"a maintenance step ({target}, {wheres[i]}) to kill in (kill {i + 1}, seed {seed})",
                paths[wheres[i]],
            )
            time.sleep(rng.uniform(0.0, 0.15))
            before, at = run.delivered(), time.monotonic()
            pid = run.kill_frontend()
            table = os.path.relpath(event.table, run.root)
            run.wait_recovered(
                FRONTEND, pid, before, 0, f"recovery from kill {i + 1} (seed {seed})",
                ready_timeout=STARTUP_TIMEOUT + READY_MARGIN,
            )
            run.record_kill(
                FRONTEND, at, pid, time.monotonic() - at, total=kills,
                note=f", {at - event.at:.2f} s after {event.what} of {table}",
            )
            if i == late_after:
                run.add_late()

        def after_drain() -> list[Violation]:
            """Maintenance still works after the kills: runs that began once the load was
            drained end without errors, and no run failed outright in any incarnation."""
            serve = run.serve
            done = len(maintenance_reports(serve))
            # The first report after the drain may come from a run that began before it.
            _wait(lambda: len(maintenance_reports(serve)) >= done + 2, 120, f"two maintenance runs after the drain (seed {seed})")
            out = []
            last = maintenance_reports(serve)[-1]
            if last.get("errors", 0):
                out.append(Violation("maintenance-completes", f"the last maintenance run after the drain had errors: {last}"))
            for n, s in enumerate(run.serves):
                failed = [line for line in s.stderr_lines if "maintenance run failed" in line]
                if failed:
                    out.append(Violation("maintenance-completes", f"incarnation {n}: a maintenance run failed: {failed[0]}"))
            return out + _unreadable_tables(run.root)

        run.finish(drain_timeout, before_stop=after_drain)
    finally:
        run.close()
    return run.result()


# ------------------------------------------------------------------------------------ replays

REPLAY_MODES = ("marks", "during", "after", "none")
"""When a replay's kill comes: right after its replayed ack rows were committed (before its
answer, so it is cut short); a random moment after the request; a random moment after its answer
(its messages on their way); never. A run has one ``marks`` round, one ``during`` or ``after``
round and one ``none`` round, in a seeded order."""
# Replays asked for until one is killed before its answer (each miss is answered). Three were
# not always enough: on a machine loaded by other crash runs all three answers came within the
# step after their marks once in 55 runs (seed 3231125620), and the run then had no replay cut short.
MARKS_TRIES = 6
STEP_RUN = 0.0005  # seconds serve runs between two looks at the ack log while a replay is awaited
MARKS_NEW_ACKS = 10  # acknowledgements awaited after a replay answered before its marks were seen
STEP_SETTLE = 0.05  # seconds an answer sent just before a stop gets to reach the caller


class _ReplayCall(threading.Thread):
    """One ``POST /admin/replay`` (:func:`sharedsub.cli.replay_client.request_replay`) on a thread."""

    def __init__(self, run: LoadedService, subscription: str, version: int) -> None:
        super().__init__(name=f"replay-{subscription}", daemon=True)
        self.run_, self.subscription, self.version = run, subscription, version
        self.incarnation = run.recorder.incarnation
        self.reply: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.requested_at = self.requested_wall = self.ended_at = self.ended_wall = 0.0
        self.done = threading.Event()

    def start(self) -> None:
        self.requested_at, self.requested_wall = time.monotonic(), time.time()
        super().start()

    def run(self) -> None:
        try:
            self.reply = request_replay(self.run_.root, IDENTITIES[self.subscription].key, version=self.version, timeout=120)
        except Exception as exc:  # the front end died under it, or refused: the record says which
            self.error = exc
        self.ended_at, self.ended_wall = time.monotonic(), time.time()
        self.done.set()

    def record(self, killed_at: float | None = None, killed_wall: float | None = None) -> Replay:
        """The :class:`Replay` for the checker: answered, or cut short by the kill at ``killed_*``."""
        if self.reply is not None:
            r = self.reply["replay"]
            return Replay(
                self.subscription, self.version, self.incarnation, self.requested_at, self.requested_wall,
                self.ended_at, self.ended_wall, r["messages"], r["reopened"], r["latest_version"],
            )
        assert killed_at is not None and killed_wall is not None, f"replay without a reply or a kill: {self.error!r}"
        return Replay(
            self.subscription, self.version, self.incarnation, self.requested_at, self.requested_wall, killed_at, killed_wall
        )


def _first_version(root: str, subscription: str) -> int:
    """The oldest version of the subscription's table: no maintenance delete precedes it, so the
    table as of it holds every row routed up to it (what replay-covers assumes)."""
    rec = load_catalog(root)[IDENTITIES[subscription].key]
    return history(layout.join(root, rec.table))[0].version


def _ack_table(root: str, subscription: str) -> str:
    rec = load_catalog(root)[IDENTITIES[subscription].key]
    return layout.join(root, layout.ack_table_rel(rec.key, rec.generation))


def _outcomes_after(acks: str, since: int) -> tuple[list[str], int]:
    """The outcomes of the rows commits after version ``since`` of the ack log added, and the
    latest version looked at."""
    latest = latest_version(acks, since) if since >= 0 else latest_version(acks)
    outcomes: list[str] = []
    for v in range(since + 1, latest + 1):
        commit = read_commit(acks, v)
        data = read_files(commit.added, ["outcome"]) if commit is not None and commit.added else None
        if data is not None:
            outcomes.extend(data.column("outcome").to_pylist())
    return outcomes, max(since, latest)


def _marks_in(acks: str, since: int) -> tuple[bool, int]:
    """Whether a commit after version ``since`` of the ack log holds ``replayed`` rows, and the
    latest version looked at."""
    outcomes, latest = _outcomes_after(acks, since)
    return "replayed" in outcomes, latest


def _await_accepted(acks: str, since: int, count: int, timeout: float, what: str) -> None:
    """Wait until commits after version ``since`` of the ack log hold ``count`` accepted rows."""
    deadline = time.monotonic() + timeout
    seen, version = 0, since
    while seen < count:
        outcomes, version = _outcomes_after(acks, version)
        seen += outcomes.count("accepted")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {count} acknowledgements before {what} again")
        time.sleep(0.05)


def _await_marks(pid: int, acks: str, since: int, call: _ReplayCall, timeout: float, what: str) -> bool:
    """Step ``serve`` (pid ``pid``) until a commit after version ``since`` of the ack log holds
    ``replayed`` rows while ``call`` has no answer: return True with the process *stopped*
    (SIGSTOP), so the kill that follows lands before the answer whatever the machine's load.
    Return False, the process running, when ``call`` was answered first.

    Why stepping: the answer follows the marks by a few milliseconds of the front end's time, less
    than one poll of the log on a loaded machine, so a poller running beside the process missed
    that window three times in a row (CI, seed 3013503376). Frozen, the process cannot move from
    its marks to its answer while the log is read; it runs for :data:`STEP_RUN` between looks.
    """
    deadline = time.monotonic() + timeout
    version = since
    while True:
        os.kill(pid, signal.SIGSTOP)
        seen, version = _marks_in(acks, version)
        if seen:
            # An answer sent just before the stop may still be on its way to the caller.
            call.done.wait(STEP_SETTLE)
            if not call.done.is_set():
                return True
        if call.done.is_set():
            os.kill(pid, signal.SIGCONT)
            return False
        os.kill(pid, signal.SIGCONT)
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for the marks of {what}")
        time.sleep(STEP_RUN)


def replay_run(
    data_dir: Path,
    *,
    seed: int,
    recovery_timeout: float = 240.0,
    drain_timeout: float = 180.0,
    logs_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> CrashResult:
    """Replays of the durable subscriptions under load, SIGKILLs of ``serve`` during them (module docstring)."""
    rng = random.Random(seed)
    modes = ["marks", rng.choice(("during", "after")), "none"]
    rng.shuffle(modes)
    # Maintenance deletes acknowledged rows, so replays also append rows back (restores).
    env = dict(MAINTENANCE_ENV, SHAREDSUB_MAINTENANCE_MIN_ACKED_ROWS="20")
    run = LoadedService(data_dir, seed=seed, env=env, recovery_timeout=recovery_timeout, logs_dir=logs_dir, progress=progress)
    root = run.root

    def ask(subscription: str, version: int) -> _ReplayCall:
        call = _ReplayCall(run, subscription, version)
        call.start()
        return call

    def answered(call: _ReplayCall, what: str) -> Replay:
        _wait(call.done.is_set, 150, f"the answer to {what} (seed {seed})")
        if call.reply is None:
            raise AssertionError(f"{what} failed (seed {seed}): {call.error!r}")
        record = call.record()
        run.recorder.replayed(record)
        progress(f"{what}: {call.reply['message']}")
        return record

    try:
        run.start()
        _wait(
            lambda: run.delivered(SHARED) >= 40 and run.delivered(DURABLE) >= 40,
            recovery_timeout,
            f"40 deliveries to each subscription before the first replay (seed {seed})",
        )
        for i, mode in enumerate(modes):
            subscription = rng.choice((SHARED, DURABLE))
            run.wait_running(f"the service to run before replay {i + 1}")
            version = _first_version(root, subscription)
            what = f"replay {i + 1} of {subscription} from version {version} ({mode})"
            if mode == "none":
                answered(ask(subscription, version), what)
                time.sleep(rng.uniform(1.0, 3.0))
                continue
            if mode == "marks":
                acks = _ack_table(root, subscription)
                for attempt in range(MARKS_TRIES):
                    since = latest_version(acks)
                    call = ask(subscription, version)
                    if _await_marks(run.serve.pid, acks, since, call, 150, what) or attempt + 1 == MARKS_TRIES:
                        break
                    answered(call, f"{what}: answered before its marks were seen")
                    # The replay opened every acknowledged message again: the next one has marks
                    # to write only once consumers acknowledged some of them anew.
                    _await_accepted(acks, latest_version(acks), MARKS_NEW_ACKS, 120, what)
            else:
                call = ask(subscription, version)
                if mode == "during":
                    time.sleep(rng.uniform(0.0, 0.6))
                else:
                    _wait(call.done.is_set, 150, f"the answer to {what} (seed {seed})")
                    time.sleep(rng.uniform(0.1, 1.0))
            before, at = run.delivered(), time.monotonic()
            pid = run.kill_frontend()
            killed_at, killed_wall = time.monotonic(), time.time()
            call.done.wait(30)  # the call ends with the connection (or had its answer already)
            record = call.record(killed_at, killed_wall)
            run.recorder.replayed(record)
            run.wait_recovered(FRONTEND, pid, before, 0, f"recovery from the kill in {what} (seed {seed})")
            state = "answered" if record.answered else "cut short"
            run.record_kill(FRONTEND, at, pid, time.monotonic() - at, note=f" during {what}: the replay was {state}")
            if not record.answered:
                # "The replay can be run again to the same effect": same start version.
                run.wait_running(f"the service to run before {what} again")
                answered(ask(subscription, version), f"{what}, again")
            time.sleep(rng.uniform(1.0, 3.0))
        run.finish(drain_timeout)
    finally:
        run.close()
    return run.result()


# ----------------------------------------------------------------------------------- restarts


def restart_run(
    data_dir: Path,
    *,
    seed: int,
    restarts: int,
    recovery_timeout: float = 240.0,
    drain_timeout: float = 180.0,
    logs_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> CrashResult:
    """``restarts`` consecutive SIGKILLs of ``serve`` under load, each once the previous restart
    runs (module docstring); every restart must be ready within the startup bound."""
    rng = random.Random(seed)
    run = LoadedService(data_dir, seed=seed, recovery_timeout=recovery_timeout, logs_dir=logs_dir, progress=progress)
    try:
        run.start()
        first_early = rng.random() < 0.5
        for i in range(restarts):
            run.wait_running(f"the service to run before kill {i + 1}")
            # Half the kills come while the new fan-out job is starting its first tasks (the old
            # one's JVM and Python workers may still be going away), half once it has settled:
            # they alternate (the seed picks which comes first), so two restarts have one of each.
            early = (i % 2 == 0) == first_early
            time.sleep(rng.uniform(0.0, 1.0) if early else rng.uniform(2.0, 6.0))
            before, at = run.delivered(), time.monotonic()
            pid = run.kill_frontend()
            run.wait_recovered(
                FRONTEND,
                pid,
                before,
                0,
                f"restart {i + 1} to print its ready line within {STARTUP_TIMEOUT + READY_MARGIN:.0f} s and deliver",
                ready_timeout=STARTUP_TIMEOUT + READY_MARGIN,
            )
            run.record_kill(FRONTEND, at, pid, time.monotonic() - at, total=restarts, note=" (early)" if early else "")
        time.sleep(rng.uniform(0.5, 3.0))
        run.finish(drain_timeout)
    finally:
        run.close()
    return run.result()
