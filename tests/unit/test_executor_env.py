"""sharedsub.core.fanout.executor_env as tables: which masters are checked, which executors are
unfit and the one line that says so, and what Spark's error text of a worker crash says."""

from __future__ import annotations

import dataclasses

import pytest

from sharedsub.core.fanout.executor_env import (
    Environment,
    WorkerFailure,
    differences,
    driver_side_line,
    failure_line,
    is_local_master,
    no_executors_line,
    unfit_line,
    worker_failure,
)

DRIVER = Environment(
    host="driver",
    python="3.11.7",
    executable="/srv/venv/bin/python",
    packages={"pyarrow": "26.0.1", "deltalake": "1.6.6", "sharedsub": "0.1.0"},
    errors={},
)
NO_ARROW = "ModuleNotFoundError: No module named 'pyarrow'"


def executor(
    host: str = "w1", python: str = "3.11.7", errors: dict[str, str] | None = None, **packages: str | None
) -> Environment:
    return dataclasses.replace(
        DRIVER, host=host, python=python, executable="/usr/bin/python3",
        packages={**DRIVER.packages, **packages}, errors=errors or {},
    )


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[4,3]", True),  # local with task retries
        (" local[*] ", True),
        ("local-cluster[2,1,768]", False),
        ("spark://host:7077", False),
        ("yarn", False),
        ("k8s://https://api:6443", False),
        ("mesos://host:5050", False),
        ("localhost", False),
    ],
)
def test_is_local_master(master: str, local: bool) -> None:
    assert is_local_master(master) is local


@pytest.mark.parametrize(
    ("theirs", "found"),
    [
        (executor(), []),
        (executor(python="3.11.2"), []),  # another micro version: PySpark runs it
        (executor(sharedsub="?"), []),  # imports, states no version (a source tree on PYTHONPATH)
        (executor(pyarrow=None, errors={"pyarrow": NO_ARROW}), [f"lacks pyarrow ({NO_ARROW})"]),
        (executor(deltalake=None), ["lacks deltalake"]),
        (executor(deltalake="1.5.0"), ["has deltalake 1.5.0 (driver: 1.6.6)"]),
        (executor(python="3.12.1"), ["runs Python 3.12.1 (/usr/bin/python3; driver: 3.11.7)"]),
        (
            executor(python="3.10.0", pyarrow=None, sharedsub="0.0.9"),
            ["runs Python 3.10.0 (/usr/bin/python3; driver: 3.11.7)", "lacks pyarrow", "has sharedsub 0.0.9 (driver: 0.1.0)"],
        ),
    ],
)
def test_differences(theirs: Environment, found: list[str]) -> None:
    assert differences(DRIVER, theirs) == found


NO_NUMPY = "ModuleNotFoundError: No module named 'numpy'"
NO_SHAREDSUB = "ModuleNotFoundError: No module named 'sharedsub'"
SOURCE = "jobs.sources.deltars_topics"


@pytest.mark.parametrize(
    ("theirs", "found"),
    [
        # the job's module does not import there: named with its error
        (executor(errors={SOURCE: NO_NUMPY}), [f"cannot import {SOURCE} ({NO_NUMPY})"]),
        # a package missing is the cause: the module's failure is not said again
        (
            executor(sharedsub=None, errors={"sharedsub": NO_SHAREDSUB, SOURCE: NO_SHAREDSUB}),
            [f"lacks sharedsub ({NO_SHAREDSUB})"],
        ),
    ],
)
def test_differences_of_the_jobs_modules(theirs: Environment, found: list[str]) -> None:
    assert differences(DRIVER, theirs) == found


def test_a_module_the_driver_cannot_import_either_is_not_the_executors_fault() -> None:
    driver = dataclasses.replace(DRIVER, errors={SOURCE: NO_NUMPY})
    assert differences(driver, executor(errors={SOURCE: NO_NUMPY})) == []


def test_a_package_the_driver_lacks_is_not_the_executors_fault() -> None:
    driver = dataclasses.replace(DRIVER, packages={**DRIVER.packages, "deltalake": None})
    assert differences(driver, executor(deltalake=None)) == []


def test_fit_executors_give_no_line() -> None:
    assert unfit_line(DRIVER, [executor("w1"), executor("w2", python="3.11.2")]) is None
    assert unfit_line(DRIVER, []) is None


def test_unfit_line_names_hosts_findings_and_fix_in_one_line() -> None:
    line = unfit_line(
        DRIVER,
        [
            executor("w2", pyarrow=None, errors={"pyarrow": NO_ARROW}),
            executor("w1", pyarrow=None, errors={"pyarrow": NO_ARROW}),
            executor("w1", pyarrow=None, errors={"pyarrow": NO_ARROW}),  # a second core of w1
            executor("w3"),
            executor("w4", deltalake="1.5.0"),
        ],
    )
    assert line is not None and "\n" not in line
    assert line.startswith(
        f"the executors' Python on w1, w2 lacks pyarrow ({NO_ARROW}); "
        "the executors' Python on w4 has deltalake 1.5.0 (driver: 1.6.6). "
    )
    assert "w3" not in line
    assert "Python 3.11 with pyarrow 26.0.1, deltalake 1.6.6, sharedsub 0.1.0" in line
    assert "--archives sharedsub-env.tar.gz#environment" in line
    assert "PYSPARK_PYTHON=./environment/bin/python" in line
    assert line.endswith('(docs/cluster.md "Routing on a Spark cluster")')


# What pyspark 4.2 raised for a task whose worker could not unpickle the function (captured on
# local-cluster[1,1,768]): the worker's traceback, then the job-abort message of the Py4J error.
UNPICKLE = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/worker.py", line 3592, in main
    func, profiler, deserializer, serializer = read_command(pickleSer, infile)
  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/serializers.py", line 454, in loads
    return cloudpickle.loads(obj, encoding=encoding)
ModuleNotFoundError: No module named 'jobs'
An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times, \
most recent failure: Lost task 0.3 in stage 1.0 (TID 4) (10.0.0.7 executor 0): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
ModuleNotFoundError: No module named 'jobs'
"""
NO_PYTHON = (
    "Job aborted due to stage failure: Task 0 in stage 0.0 failed 4 times, most recent failure: Lost task 0.3 in "
    'stage 0.0 (TID 3) (127.0.0.1 executor 0): java.io.IOException: Cannot run program "/opt/py/bin/python": '
    "error=2, No such file or directory\n\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)"
)
VERSIONS = (
    "pyspark.errors.exceptions.base.PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different "
    "version: 3.12 than that in driver: 3.11, PySpark cannot run with different minor versions.\n"
    "Please check environment variables PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON are correctly set."
)

NO_LIBARROW = "ImportError: libarrow.so.2600: cannot open shared object file"


@pytest.mark.parametrize(
    ("text", "failure"),
    [
        (UNPICKLE, WorkerFailure("10.0.0.7", "ModuleNotFoundError: No module named 'jobs'")),
        (NO_PYTHON, WorkerFailure("127.0.0.1", 'Cannot run program "/opt/py/bin/python": error=2, No such file or directory')),
        (
            VERSIONS,
            WorkerFailure(
                None,
                "[PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.12 than that in driver: 3.11, "
                "PySpark cannot run with different minor versions.",
            ),
        ),
        (NO_LIBARROW, WorkerFailure(None, NO_LIBARROW)),
        ("Job aborted: Lost task 0.3 in stage 0.0 (TID 3) (w1 executor 2): java.lang.OutOfMemoryError", None),
        ("ZeroDivisionError: division by zero", None),
    ],
)
def test_worker_failure(text: str, failure: WorkerFailure | None) -> None:
    assert worker_failure(text) == failure


@pytest.mark.parametrize(
    ("failure", "start"),
    [
        (WorkerFailure("w1", "ModuleNotFoundError: No module named 'jobs'"),
         "the executors' Python on w1 cannot run the fan-out's code: ModuleNotFoundError: No module named 'jobs'. "
         "The fan-out needs"),
        (WorkerFailure(None, "[PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.12 ... versions."),
         "the executors' Python cannot run the fan-out's code: [PYTHON_VERSION_MISMATCH] Python in worker has different "
         "version: 3.12 ... versions. The fan-out needs"),
    ],
)
def test_failure_line(failure: WorkerFailure, start: str) -> None:
    line = failure_line(failure, DRIVER)
    assert line.startswith(start) and "\n" not in line
    assert line.endswith('(docs/cluster.md "Routing on a Spark cluster")')


def test_no_executors_line_names_master_timeout_and_the_usual_causes() -> None:
    line = no_executors_line(180.0, "local-cluster[2,1,768]")
    assert "\n" not in line
    assert line.startswith(
        "no executor of local-cluster[2,1,768] ran the fan-out's start-up check within 180 s (fanout.startup_timeout)"
    )
    assert "spark.executor.memory" in line and "workers are registered" in line


def test_driver_side_line_says_where_to_unpack_the_archive() -> None:
    line = driver_side_line("./environment/bin/python")
    assert "\n" not in line
    assert line.startswith("the executors' Python ./environment/bin/python cannot be run on the driver's host")
    assert "mkdir environment && tar -xzf sharedsub-env.tar.gz -C environment" in line
