"""The fan-out job's start-up check of a cluster's executors: can their Python run its code?

:func:`check_executors` runs once, right after the SparkSession is built (jobs/fanout.py). For a
master that is not local (``local-cluster[...]``, ``spark://``, ``yarn``, ``k8s://``) it runs one
small Spark job, one task per executor core, described in the Spark UI as
:data:`JOB_DESCRIPTION`, whose tasks report their host, their Python and the versions of
pyarrow, deltalake and sharedsub that their Python imports, and whether it imports the job's
modules that Spark runs there (:data:`~sharedsub.core.fanout.executor_env.MODULES`). The
driver's own answers are the reference; :mod:`sharedsub.core.fanout.executor_env` decides. An executor whose Python lacks
one of them, has another version or another Python, or cannot even start the task (a worker
that fails to import what Spark sends it, a Python binary that is not there) makes it raise
:class:`~sharedsub.core.errors.ExecutorsUnfit` with one line; the job prints that line and stops
(exit 6) instead of failing every micro-batch with a stack trace. So does a cluster that runs no
executor for the check within ``[fanout] startup_timeout`` (no worker with room for one): Spark
itself would wait for ever, warning every 15 s. And so does an executors' Python that cannot be
run on the driver's host: Spark starts it there too, to plan the job's topic source (a Python
data source), so ``PYSPARK_PYTHON=./environment/bin/python`` needs ``./environment`` beside
the driver as well as in each executor's working directory.

The check's function is defined inside :func:`_probe` so that cloudpickle ships it by value, not
as a reference to this module: an executor without sharedsub (or jobs/) can still run it and
say what it lacks. It uses the standard library only.
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from sharedsub.core.errors import ExecutorsUnfit
from sharedsub.core.fanout.executor_env import (
    MODULES,
    PACKAGES,
    UNKNOWN_VERSION,
    Environment,
    driver_side_line,
    failure_line,
    is_local_master,
    no_executors_line,
    unfit_line,
    worker_failure,
)

JOB_DESCRIPTION = "sharedsub fan-out: check the executors' Python packages"
# What SparkContext.setJobGroup sets for the thread's next jobs; restored after the check.
_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
# Logs one WARN line with the worker's whole traceback per failed attempt of a task, then an
# ERROR: for the check, whose failure becomes one line of its own, that is the stack trace
# the check exists to replace.
_TASK_LOGGER = "org.apache.spark.scheduler.TaskSetManager"

log = logging.getLogger("sharedsub.fanout")

# Any: what the check's tasks send back, plain picklable values (see _probe).
Answer = dict[str, Any]


def _probe(
    packages: tuple[str, ...], modules: tuple[str, ...], unknown: str
) -> Callable[[Iterable[int]], Iterator[Answer]]:
    """The check's task: for its partition, one answer of the Python it runs in."""

    def describe(_rows: Iterable[int]) -> Iterator[Answer]:
        # Imports here, standard library only: this runs on executors that may lack everything else.
        import importlib
        import importlib.metadata
        import platform
        import socket
        import sys

        versions: dict[str, str | None] = {}
        errors: dict[str, str] = {}
        for name in packages:
            try:
                module = importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 (reported to the driver: finding it is the check's point)
                versions[name], errors[name] = None, f"{type(exc).__name__}: {exc}"
                continue
            version = getattr(module, "__version__", None)
            if version is None:
                try:
                    version = importlib.metadata.version(name)
                except importlib.metadata.PackageNotFoundError:
                    version = unknown
            versions[name] = str(version)
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 (reported to the driver, as above)
                errors[name] = f"{type(exc).__name__}: {exc}"
        yield {
            "host": socket.gethostname(),
            "python": platform.python_version(),
            "executable": sys.executable,
            "packages": versions,
            "errors": errors,
        }

    return describe


def _environment(answer: Answer) -> Environment:
    return Environment(
        host=str(answer["host"]),
        python=str(answer["python"]),
        executable=str(answer["executable"]),
        packages=dict(answer["packages"]),
        errors=dict(answer["errors"]),
    )


def driver_environment() -> Environment:
    """This Python's own answer to the check (the reference the executors' are compared with)."""
    return _environment(next(_probe(PACKAGES, MODULES, UNKNOWN_VERSION)(iter(()))))


def check_executors(spark: SparkSession, *, timeout: float = 180.0) -> None:
    """Return when ``spark``'s master is local, or when every executor's Python can run the
    fan-out's code; otherwise raise. ``timeout``: seconds the executors have to run the check
    (the job's ``[fanout] startup_timeout``); a cluster that starts none in that time is unfit.

    Raises:
        ExecutorsUnfit: one line naming the executor hosts, what their Python lacks or has
            otherwise than the driver's, and how to fix it; or that no executor ran the check.
        Exception: any other failure of the check's Spark job, as Spark raised it.
    """
    sc = spark.sparkContext
    master = sc.master or "local"  # pyspark types it Optional; a running context has one
    if is_local_master(master):
        return
    if shutil.which(sc.pythonExec) is None:  # the Python workers' path, relative to each one's working dir
        raise ExecutorsUnfit(driver_side_line(sc.pythonExec))
    driver = driver_environment()
    tasks = max(1, sc.defaultParallelism)  # one per executor core
    previous = {key: sc.getLocalProperty(key) for key in _JOB_PROPERTIES}
    group = f"sharedsub-executor-check-{uuid.uuid4().hex}"
    sc.setJobGroup(group, JOB_DESCRIPTION, interruptOnCancel=True)
    timed_out = threading.Event()

    def give_up() -> None:
        timed_out.set()
        sc.cancelJobGroup(group)

    # A cluster without room for an executor never runs the tasks: Spark only warns every 15 s.
    timer = threading.Timer(timeout, give_up)
    timer.daemon = True
    restore_level = _silence(sc, _TASK_LOGGER)
    timer.start()
    try:
        answers = sc.parallelize(range(tasks), tasks).mapPartitions(_probe(PACKAGES, MODULES, UNKNOWN_VERSION)).collect()
    except Exception as exc:
        if timed_out.is_set():
            raise ExecutorsUnfit(no_executors_line(timeout, master)) from None
        failure = worker_failure(_error_text(exc))
        if failure is None:
            raise
        raise ExecutorsUnfit(failure_line(failure, driver)) from None
    finally:
        timer.cancel()
        restore_level()
        for key, value in previous.items():
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]  # None unsets it (pyspark's doc)
    executors = [_environment(answer) for answer in answers]
    line = unfit_line(driver, executors)
    if line is not None:
        raise ExecutorsUnfit(line)
    log.info(
        "executors checked (master %s): %s run Python %s with %s",
        sc.master,
        ", ".join(sorted({e.host for e in executors})),
        driver.python,
        ", ".join(f"{name} {driver.packages[name]}" for name in PACKAGES),
    )


def _error_text(exc: BaseException) -> str:
    """The messages of ``exc`` and the exceptions it came from: pyspark raises the Python
    worker's error (the traceback) from None, over the Py4J error whose job-abort message names
    the executor host."""
    texts, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts.append(str(current))
        current = current.__cause__ or current.__context__
    return "\n".join(texts)


def _silence(sc: SparkContext, name: str) -> Callable[[], None]:
    """Turn the driver JVM's log4j logger ``name`` off; return what restores its level."""
    jvm = sc._jvm  # noqa: SLF001 (pyspark 4.2: the gateway's JVM view; no public accessor)
    try:
        log4j = jvm.org.apache.logging.log4j  # type: ignore[union-attr]
        configurator = log4j.core.config.Configurator
        level = log4j.LogManager.getLogger(name).getLevel()
        configurator.setLevel(name, log4j.Level.OFF)
    except Exception:  # noqa: BLE001 (another logging back end under spark-submit: its lines stay)
        return lambda: None
    return lambda: configurator.setLevel(name, level)
