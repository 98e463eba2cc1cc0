"""Cores each process on this machine keeps busy over a window, named by role.

    python3 bench/process_cpu.py [--window 20]

Reads ``/proc/<pid>/stat`` at the start and the end of the window; prints one line per process
that used at least 0.5% of a core, most first, with the role of sharedsub's processes ("append
child", "fan-out Python", "fan-out JVM", "serve", the Spark source runner) and the bench's own, then
the total. Run it beside ``bench/run.py ... --only latency`` once its warm-up is over to see how a
steady load divides between serve, its append child and the fan-out (bench/RESULTS.md, issue 31).
Standard library and bench/procstat.py only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import procstat  # noqa: E402 (bench/ is not a package)

_ROLES = (  # (what the command line holds, the role shown), first match wins
    ("sharedsub.storage.commits.append_process", "append child"),
    ("python_streaming_source_runner", "fan-out source runner (Python)"),
    ("pyspark.daemon", "Spark Python worker"),
    ("jobs.fanout", "fan-out Python (driver)"),
    ("org.apache.spark", "fan-out JVM"),
    ("sharedsub serve", "serve (front end)"),
    ("sharedsub frontend", "frontend"),
    ("bench/run.py", "bench harness"),
    ("rhea_client", "bench client (rhea)"),
)


def _snapshot() -> dict[int, tuple[float, str]]:
    """pid -> (user + system CPU seconds, command line)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        cpu = procstat.process_cpu_seconds(int(name))
        if cpu is not None:
            out[int(name)] = (cpu, command)
    return out


def role(command: str) -> str:
    """The role of a process with ``command``, or the start of the command."""
    return next((shown for marker, shown in _ROLES if marker in command), command[:60])


def main() -> None:
    """Measure one window and print it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured (default 20)")
    args = parser.parse_args()
    before = _snapshot()
    time.sleep(args.window)
    after = _snapshot()
    rows = []
    for pid, (cpu, command) in after.items():
        cores = (cpu - before.get(pid, (0.0, ""))[0]) / args.window
        if cores >= 0.005:
            rows.append((cores, pid, role(command)))
    for cores, pid, shown in sorted(rows, reverse=True):
        print(f"{cores:6.3f}  {pid:>7}  {shown}")
    print(f"{sum(r[0] for r in rows):6.3f}  total over {args.window:.0f} s")


if __name__ == "__main__":
    main()
