"""Cheap process and machine figures read from /proc (psutil is not a dependency).

CPU seconds are user + system time of live processes. For a process tree the figure covers
the processes alive at the moment of reading; CPU of a child that exited in between is only
counted if its parent waited for it (``cutime``/``cstime`` of the root are included).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def loadavg_1m() -> float:
    """Return the 1-minute load average."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def self_cpu_seconds() -> float:
    """Return user + system CPU seconds of this process (all threads)."""
    t = os.times()
    return t.user + t.system


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is None:
            continue
        # fields[0] is state (field 3), fields[1] is ppid (field 4).
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def tree_pids(root: int) -> list[int]:
    """Return ``root`` and all its live descendants."""
    children = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def tree_cpu_seconds(root: int) -> float:
    """Return CPU seconds (user + system) of ``root`` and its live descendants."""
    total = 0
    for pid in tree_pids(root):
        fields = _stat_fields(pid)
        if fields is None:
            continue
        # utime, stime, cutime, cstime are fields 14-17 (1-based) -> indexes 11-14 here.
        total += int(fields[11]) + int(fields[12])
        if pid == root:
            total += int(fields[13]) + int(fields[14])
    return total / _CLK_TCK


def process_cpu_seconds(pid: int) -> float | None:
    """Return CPU seconds (user + system, all threads) of process ``pid`` alone, or None when it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / _CLK_TCK


CpuSnapshot = dict[tuple[int, str], float]
"""CPU seconds (user + system) per live process of a tree, keyed by (pid, command name)."""


def tree_cpu_by_command(root: int) -> CpuSnapshot:
    """Return CPU seconds (user + system) of ``root`` and each of its live descendants, keyed by
    pid and command name (``/proc/<pid>/comm``, e.g. ``sharedsub``, ``java``, ``python``); sum
    two of them with :func:`cpu_by_command_delta`."""
    out: CpuSnapshot = {}
    for pid in tree_pids(root):
        fields = _stat_fields(pid)
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                name = f.read().strip()
        except OSError:
            continue
        if fields is not None:
            out[(pid, name)] = (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return out


def cpu_by_command_delta(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float]:
    """Return the CPU seconds spent between two snapshots per command name, rounded, leaving out
    the ones that did not move.

    Per process: a process in both counts what it spent in between, one that started in between
    counts all it spent, one that ended in between counts nothing (what it spent before it ended
    is not known). Summing per command name first, as this did before 2026-11-30, let a process
    that ended (an idle Spark Python worker) take its whole lifetime's CPU off the others of its
    name: the idle bench showed the fan-out's Python processes at 0.008 cores where they spent
    0.024 (bench/RESULTS.md, issue 43).
    """
    out: dict[str, float] = {}
    for key, value in after.items():
        out[key[1]] = out.get(key[1], 0.0) + value - before.get(key, 0.0)
    return {name: round(d, 2) for name, d in out.items() if round(d, 2) > 0}


ThreadSnapshot = dict[tuple[int, int], tuple[str, float]]
"""CPU seconds per live thread of a tree, keyed by (pid, tid), with "process/thread" names."""


def tree_cpu_by_thread(root: int) -> ThreadSnapshot:
    """Return each live thread's CPU seconds (user + system) in ``root``'s tree, named
    ``<process comm>/<thread comm>`` (e.g. ``java/stream executio``, ``python/python``)."""
    out: ThreadSnapshot = {}
    for pid in tree_pids(root):
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                process = f.read().strip()
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                    raw = f.read()
                with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
                    thread = f.read().strip()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2 :].split()
            out[(pid, int(tid))] = (f"{process}/{thread}", (int(fields[11]) + int(fields[12])) / _CLK_TCK)
    return out


def busiest_threads(before: ThreadSnapshot, after: ThreadSnapshot, seconds: float, top: int = 12) -> dict[str, float]:
    """The ``top`` thread names by cores busy between two snapshots ``seconds`` apart (threads of
    one name summed; a thread counts as in :func:`cpu_by_command_delta`)."""
    by_name: dict[str, float] = {}
    for key, (name, cpu) in after.items():
        by_name[name] = by_name.get(name, 0.0) + cpu - before.get(key, (name, 0.0))[1]
    ranked = sorted(by_name.items(), key=lambda item: -item[1])[:top]
    return {name: round(cpu / seconds, 4) for name, cpu in ranked if cpu > 0}


def cpu_reader(root: int) -> Callable[[], float]:
    """Return a cheap function giving CPU seconds of the tree under ``root`` as it is now.

    The process list is fixed here, so each call reads only those processes' stat files:
    cheap enough to call inside a reactor callback.
    """
    pids = tree_pids(root)
    last: dict[int, int] = {}  # each process's CPU at the last read it was alive at

    def read() -> float:
        # A process that has ended keeps what it had spent at the last read: dropping it would
        # take its whole lifetime's CPU off the next difference.
        for pid in pids:
            fields = _stat_fields(pid)
            if fields is not None:
                last[pid] = int(fields[11]) + int(fields[12])
        return sum(last.values()) / _CLK_TCK

    return read


def _busy_jiffies() -> int:
    with open("/proc/stat", encoding="ascii") as f:
        cpu = f.readline().split()[1:]
    # user nice system idle iowait irq softirq steal ...; idle and iowait are not busy.
    values = [int(x) for x in cpu[:8]]
    return sum(values) - values[3] - values[4]


def other_busy_cores(exclude_roots: list[int], interval_s: float = 1.0) -> float:
    """Return how many cores processes other than ``exclude_roots`` (and this one) kept busy.

    Measured over ``interval_s`` from /proc/stat minus the excluded trees' own CPU time.
    """
    readers = [cpu_reader(pid) for pid in exclude_roots]
    before = _busy_jiffies() / _CLK_TCK, sum(r() for r in readers), self_cpu_seconds()
    time.sleep(interval_s)
    after = _busy_jiffies() / _CLK_TCK, sum(r() for r in readers), self_cpu_seconds()
    others = (after[0] - before[0]) - (after[1] - before[1]) - (after[2] - before[2])
    return max(0.0, others / interval_s)


def tree_rss_bytes(root: int) -> int:
    """Return the summed resident set size of ``root`` and its live descendants."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in tree_pids(root):
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            continue
    return total


def machine_info() -> dict[str, object]:
    """Describe the machine: cores, memory, CPU model, kernel, Python."""
    mem_kib = 0
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
                break
    model = ""
    with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": os.cpu_count(),
        "nproc_available": len(os.sched_getaffinity(0)),
        "mem_total_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def dir_breakdown(path: str) -> dict[str, int]:
    """Return apparent bytes under each entry directly inside ``path`` (files count as themselves)."""
    out = {}
    for entry in sorted(os.listdir(path)):
        full = os.path.join(path, entry)
        out[entry] = dir_bytes(full)["apparent_bytes"] if os.path.isdir(full) else os.lstat(full).st_size
    return out


def dir_bytes(path: str) -> dict[str, int]:
    """Return apparent bytes, allocated bytes (as ``du``) and file count of all files under ``path``."""
    apparent = allocated = files = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            apparent += st.st_size
            allocated += st.st_blocks * 512
            files += 1
    return {"apparent_bytes": apparent, "du_bytes": allocated, "files": files}


class BrokerMetrics:
    """CPU and memory probes of a broker process tree; subclasses say which pid is the broker."""

    def broker_pid(self) -> int | None:
        """Pid at the root of the broker's process tree, or None when not running."""
        raise NotImplementedError

    def cpu_probe(self) -> Callable[[], float | None]:
        """Return a cheap reader of the CPU seconds used so far by the broker's processes."""
        pid = self.broker_pid()
        return cpu_reader(pid) if pid else (lambda: None)

    def cpu_by_command(self) -> CpuSnapshot:
        """Return CPU seconds used so far by each of the broker's processes (:func:`tree_cpu_by_command`)."""
        pid = self.broker_pid()
        return tree_cpu_by_command(pid) if pid else {}

    def rss_bytes(self) -> int | None:
        """Return the resident memory of the broker's process tree."""
        pid = self.broker_pid()
        return tree_rss_bytes(pid) if pid else None
