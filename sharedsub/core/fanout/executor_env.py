"""Whether a Spark cluster's executors can run the fan-out's Python code; pure.

The fan-out job runs Python on executors (the topic source's reads, executor routing), so each
executor's Python must import the packages the driver's does, at the same versions: a mismatch
found there would fail every micro-batch with a stack trace. At start (jobs/executor_check.py) the
job asks every executor's Python what it has, as an :class:`Environment`, and these rules turn
the answers into one line, or none:

    question                                         rule
    -----------------------------------------------  --------------------------------------------
    check at all?                                    not for ``local``, ``local[N]``, ``local[*]``,
                                                     ``local[N,F]`` (workers are the driver's own
                                                     Python); yes for ``local-cluster[...]``,
                                                     ``spark://``, ``yarn``, ``k8s://``, anything else
    a package the driver has, the executor has not   unfit: "lacks pyarrow (No module named ...)"
    a package at another version                     unfit: "has deltalake 1.5.0 (driver: 1.6.6)"
    one of :data:`MODULES` the driver imports, the   unfit: "cannot import jobs.sources.deltars_topics
    executor cannot (said only when every package    (ModuleNotFoundError: No module named
    imports: else that is the cause)                 'numpy')"
    a version either side cannot tell ("?")          fit (an import that works is all we know)
    Python of another major.minor                    unfit (pickled code and PySpark itself need it)
    Python of another micro version                  fit
    the executor's Python could not run the check    unfit: :func:`worker_failure` reads why from
                                                     Spark's error text
    the executors' Python cannot be run on the       unfit: :func:`driver_side_line` (Spark starts
    driver's host, from its working directory        the topic source, a Python data source, there
                                                     with that same Python)
    no executor ran the check within the timeout     unfit: :func:`no_executors_line` (a cluster
                                                     with no worker able to host an executor)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PACKAGES = ("pyarrow", "deltalake", "sharedsub")
"""The packages the fan-out's Python code imports on executors, whose versions must match the driver's."""

MODULES = ("jobs.sources.deltars_topics", "jobs.executor_routing")
"""The job's own modules that Spark runs on executors, imported whole by the check: their
imports (numpy, pandas, ...) must work there too, not only the three :data:`PACKAGES`."""

UNKNOWN_VERSION = "?"
"""The version of a package that imports but states none (e.g. a source tree on PYTHONPATH)."""

GUIDE_SECTION = 'docs/cluster.md "Routing on a Spark cluster"'

_LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")


@dataclass(frozen=True)
class Environment:
    """What one Python said of itself.

    ``packages`` maps each name of :data:`PACKAGES` to its version (:data:`UNKNOWN_VERSION` when
    it imports without stating one) or to None when it cannot be imported; ``errors`` holds the
    import error (``ModuleNotFoundError: No module named 'pyarrow'``) of each name of
    :data:`PACKAGES` or :data:`MODULES` that cannot be imported.
    """

    host: str
    python: str  # "3.11.7"
    executable: str
    packages: Mapping[str, str | None]
    errors: Mapping[str, str]


def is_local_master(master: str) -> bool:
    """Whether Spark master URL ``master`` runs Python workers in the driver's own process tree
    (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``), so they share its interpreter."""
    return _LOCAL_MASTER.fullmatch(master.strip()) is not None


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def differences(driver: Environment, executor: Environment) -> list[str]:
    """What ``executor`` lacks or has otherwise than ``driver``, as phrases for a message; [] if fit."""
    found = []
    if _minor(executor.python) != _minor(driver.python):
        found.append(f"runs Python {executor.python} ({executor.executable}; driver: {driver.python})")
    for name in PACKAGES:
        wanted, got = driver.packages.get(name), executor.packages.get(name)
        if wanted is None:
            continue  # the driver lacks it too: not the executors' fault, and the job fails earlier
        if got is None:
            why = executor.errors.get(name, "")
            found.append(f"lacks {name}" + (f" ({why})" if why else ""))
        elif UNKNOWN_VERSION not in (got, wanted) and got != wanted:
            found.append(f"has {name} {got} (driver: {wanted})")
    if all(executor.packages.get(name) is not None for name in PACKAGES):
        for name in MODULES:
            if name in executor.errors and name not in driver.errors:
                found.append(f"cannot import {name} ({executor.errors[name]})")
    return found


def unfit_line(driver: Environment, executors: Iterable[Environment]) -> str | None:
    """One line naming what each unfit executor host lacks or has otherwise, and how to fix it;
    None when every executor is fit. Hosts with the same findings are named together."""
    by_findings: dict[str, list[str]] = {}
    for executor in executors:
        found = differences(driver, executor)
        if found:
            hosts = by_findings.setdefault("; ".join(found), [])
            if executor.host not in hosts:
                hosts.append(executor.host)
    if not by_findings:
        return None
    what = "; ".join(
        f"the executors' Python on {', '.join(sorted(hosts))} {found}" for found, hosts in by_findings.items()
    )
    return f"{what}. {how_to_fix(driver)}"


def how_to_fix(driver: Environment) -> str:
    """The fix, naming the driver's Python and package versions."""
    wanted = ", ".join(f"{name} {driver.packages[name]}" for name in PACKAGES if driver.packages.get(name))
    return (
        f"The fan-out needs Python {_minor(driver.python)} with {wanted} on every executor: ship the "
        "driver's environment (--archives sharedsub-env.tar.gz#environment with "
        "PYSPARK_PYTHON=./environment/bin/python) or install them on the executor hosts "
        f"({GUIDE_SECTION})"
    )


# "Lost task 0.3 in stage 1.0 (TID 4) (127.0.0.1 executor 0)": Spark's failed-task line, which
# the job-abort message repeats for the most recent failure.
_LOST_TASK = re.compile(r"Lost task \S+ in stage \S+ \(TID \d+\) \((\S+) executor [^)]+\)")
# The Python worker's last traceback line, or the exec failure of a Python that is not there.
_WORKER_ERRORS = (
    re.compile(r"^((?:ModuleNotFoundError|ImportError): .*)$", re.MULTILINE),
    re.compile(r"\[PYTHON_VERSION_MISMATCH\][^\n]*"),
    re.compile(r"Python in worker has different version[^\n]*"),
    re.compile(r'Cannot run program "[^"]*"[^\n]*'),
)


@dataclass(frozen=True)
class WorkerFailure:
    """Why an executor's Python could not run the check: ``reason`` a line of Spark's error (the
    Python worker's import error, a version mismatch, a Python that cannot be started) and
    ``host`` the executor host of the last failed attempt, None when the text names none."""

    host: str | None
    reason: str


def worker_failure(text: str) -> WorkerFailure | None:
    """The :class:`WorkerFailure` that Spark's error ``text`` (the exception's message and the
    job-abort message it came from) reports, or None when it reports none of the known ones (an
    error of another kind, which the caller lets through)."""
    for pattern in _WORKER_ERRORS:
        found = pattern.findall(text)
        if found:
            hosts = _LOST_TASK.findall(text)
            return WorkerFailure(hosts[-1] if hosts else None, found[-1].strip())
    return None


def failure_line(failure: WorkerFailure, driver: Environment) -> str:
    """One line for a :class:`WorkerFailure`, naming its host when Spark's error did."""
    where = f" on {failure.host}" if failure.host else ""
    return f"the executors' Python{where} cannot run the fan-out's code: {failure.reason.rstrip('.')}. {how_to_fix(driver)}"


def no_executors_line(timeout: float, master: str) -> str:
    """One line for a check that no executor ran within ``timeout`` seconds on ``master``."""
    return (
        f"no executor of {master} ran the fan-out's start-up check within {timeout:g} s "
        "(fanout.startup_timeout): the cluster gave the job no executors. Check that workers are "
        "registered with the master and have the cores and memory one executor asks for "
        f"(spark.executor.cores, spark.executor.memory; {GUIDE_SECTION})"
    )


def driver_side_line(python: str) -> str:
    """One line for an executors' Python (``spark.pyspark.python`` / ``PYSPARK_PYTHON``) that
    cannot be run on the driver's host, from its working directory."""
    return (
        f"the executors' Python {python} cannot be run on the driver's host (from its working "
        "directory), where Spark starts it too: the fan-out's topic source is a Python data source "
        "that Spark plans there. With --archives sharedsub-env.tar.gz#environment, unpack the same "
        "archive as ./environment in the directory spark-submit runs in "
        f"(mkdir environment && tar -xzf sharedsub-env.tar.gz -C environment; {GUIDE_SECTION})"
    )
