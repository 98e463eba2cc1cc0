"""The storage-fault rules (sharedsub/core/publish/write_faults.py) as tables."""

from __future__ import annotations

import errno

import pytest

from sharedsub.core.errors import StorageUnavailable
from sharedsub.core.publish.write_faults import ON_GIVE_UP, PARK, REFUSE, FaultClock, RetryPolicy, errno_name, fault_errno

# delta-rs error texts as seen on a full tmpfs (the second one is multi-line, with colour codes).
DELTA_ENOSPC = (
    "Failed to parse parquet: External: Generic LocalFileSystem error: Unable to copy data to file: "
    "No space left on device (os error 28)"
)
DELTA_ENOSPC_LOG = (
    "Generic LocalFileSystem error\n          \x1b[31m↳\x1b[0m Unable to copy data to file\n"
    "           \x1b[31m↳\x1b[0m No space left on device (os error 28)\n"
)
DELTA_EROFS = "Generic LocalFileSystem error: Unable to open file /d/t/part-0.parquet#1: Read-only file system (os error 30)"
DELTA_EROFS_DEBUG = (
    "Could not create local directory: /d/subscriptions/k/acks-g1\n"
    'Error: Os { code: 30, kind: ReadOnlyFilesystem, message: "Read-only file system" }'
)

# object_store (delta-rs) error texts against versitygw: killed (connection refused), SIGSTOPped
# (a request that timed out; multi-line, with colour codes), a 5xx answer, a refused signature.
DELTA_S3_KILLED = (
    "Failed to parse parquet: External: Generic S3 error: Error performing PUT http://127.0.0.1:50021/b/data/t/"
    "part-0.snappy.parquet in 1.89s, after 10 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: "
    "error sending request"
)
DELTA_S3_HUNG = (
    "Kernel error -> Generic S3 error\n          \x1b[31m↳\x1b[0m Error performing GET http://127.0.0.1:44905/b/data/"
    "t/_delta_log/00000000000000000000.json in 6.1s, after 1 retries, max_retries\n           \x1b[31m↳\x1b[0m 10, "
    "retry_timeout\n            \x1b[31m↳\x1b[0m 5s  - HTTP error\n             \x1b[31m↳\x1b[0m error sending "
    "request\n              \x1b[31m↳\x1b[0m operation timed out\n"
)
DELTA_S3_5XX = (
    "Generic S3 error: Error performing PUT http://127.0.0.1:1/b/k in 10s, after 10 retries - Server returned "
    "non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>"
)
DELTA_S3_FORBIDDEN = (
    "Generic S3 error: Error performing PUT http://127.0.0.1:1/b/k in 2ms - Client error with status 403 "
    "Forbidden: <Error><Code>SignatureDoesNotMatch</Code></Error>"
)


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise outer from inner
    except BaseException as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), errno.ENOSPC),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), errno.EDQUOT),
        (OSError(errno.EROFS, "Read-only file system"), errno.EROFS),
        (Exception(DELTA_ENOSPC), errno.ENOSPC),
        (Exception(DELTA_ENOSPC_LOG), errno.ENOSPC),
        (Exception(DELTA_EROFS), errno.EROFS),
        (Exception(DELTA_EROFS_DEBUG), errno.EROFS),
        (Exception('Error: Os { code: 13, kind: PermissionDenied, message: "Permission denied" }'), None),
        (Exception("Generic error (os error 122)"), errno.EDQUOT),
        # not storage faults: the data or another failure, never retried as one
        (OSError(errno.EIO, "Input/output error"), None),
        (OSError(errno.EACCES, "Permission denied"), None),
        (Exception("Generic LocalFileSystem error: Permission denied (os error 13)"), None),
        (Exception("Invalid data: schema mismatch"), None),
        (ValueError("os error 28 without parentheses"), None),
        # found through the chain an error was raised from
        (_chained(RuntimeError("commit failed"), OSError(errno.ENOSPC, "No space left on device")), errno.ENOSPC),
        (_chained(RuntimeError("commit failed"), ValueError("bad")), None),
        # an object store that does not answer (texts measured against a killed / SIGSTOPped versitygw)
        (Exception(DELTA_S3_KILLED), errno.ECONNREFUSED),
        (OSError(DELTA_S3_HUNG), errno.ETIMEDOUT),
        (Exception(DELTA_S3_5XX), errno.EAGAIN),
        (OSError(errno.ETIMEDOUT, "object store s3://b/d did not answer HEAD k: operation timed out"), errno.ETIMEDOUT),
        # ... and one that answered with a refusal: an operator's fault, not held
        (Exception(DELTA_S3_FORBIDDEN), None),
        (Exception("Generic S3 error: Error performing GET http://127.0.0.1:1/b/k - NoSuchBucket"), None),
        (Exception("error sending request"), None),  # not an object-store client's error
    ],
)
def test_fault_errno(exc: BaseException, expected: int | None) -> None:
    assert fault_errno(exc) == expected


def test_errno_names() -> None:
    assert [errno_name(c) for c in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)] == ["ENOSPC", "EDQUOT", "EROFS"]
    assert errno_name(99999) == "99999"


@pytest.mark.parametrize(
    ("waited", "attempt", "stopping", "expected"),
    [
        (0.0, 1, False, 0.05),  # first retry soon: a fault may pass at once (a file deleted)
        (0.1, 2, False, 0.1),
        (0.3, 3, False, 0.2),
        (1.0, 6, False, 1.6),
        (3.0, 7, False, 2.0),  # the delay doubles up to max_delay
        (9.0, 30, False, 2.0),  # no overflow however many tries
        (59.5, 20, False, 0.5),  # never past the timeout: the last try comes at it
        (60.0, 21, False, None),  # the fault outlasted the timeout: give up
        (120.0, 1, False, None),  # after it, a new write is tried once and given up on
        (0.0, 1, True, None),  # a stopping service gives up at once
    ],
)
def test_retry_delay(waited: float, attempt: int, stopping: bool, expected: float | None) -> None:
    delay = RetryPolicy(timeout=60.0).delay(waited, attempt, stopping=stopping)
    assert delay == (pytest.approx(expected) if expected is not None else None)


def test_at_start_a_read_only_data_dir_is_to_be_remounted() -> None:
    error = StorageUnavailable("/srv/data", errno.EROFS, "Read-only file system")
    assert error.description == (
        "data dir /srv/data cannot take writes: Read-only file system (EROFS); remount it read-write, then start again"
    )


def test_timeout_zero_refuses_at_the_first_failure() -> None:
    assert RetryPolicy(timeout=0.0).delay(0.0, 1) is None


@pytest.mark.parametrize(
    ("kind", "on_give_up"),
    [
        ("publish", REFUSE),
        ("transaction", REFUSE),
        ("create-topic", REFUSE),
        ("subscription", REFUSE),
        ("ack", PARK),
        ("dead-letter", PARK),
        ("link-event", PARK),
        ("barrier", PARK),
    ],
)
def test_what_giving_up_does(kind: str, on_give_up: object) -> None:
    assert ON_GIVE_UP[kind] is on_give_up


def test_a_fault_is_reported_once_when_it_starts_and_once_when_it_clears() -> None:
    clock = FaultClock(RetryPolicy(timeout=10.0))
    assert clock.success() is None  # no fault: nothing to report
    started = clock.failure(errno.ENOSPC, "/d/topics/t", now=100.0, wall=1e9)
    assert started is not None and (started.name, started.path, started.message) == (
        "ENOSPC", "/d/topics/t", "No space left on device",
    )
    assert clock.failure(errno.ENOSPC, "/d/topics/t", now=101.0, wall=1e9 + 1) is None  # a retry
    assert clock.failure(errno.EROFS, "/d/catalog", now=102.0, wall=1e9 + 2) is None  # same fault, other cause
    assert clock.fault is started  # the first failure names the fault
    assert clock.waited(105.0) == 5.0 and not clock.refusing(105.0)
    assert clock.refusing(110.0)
    ended = clock.success()
    assert ended == (started, 3)
    assert clock.fault is None and clock.success() is None and clock.waited(200.0) == 0.0


def test_giving_up_is_reported_once_per_fault() -> None:
    clock = FaultClock(RetryPolicy(timeout=1.0))
    assert not clock.gave_up()  # no fault
    clock.failure(errno.EROFS, "/d/x", now=0.0, wall=0.0)
    assert clock.gave_up() and not clock.gave_up()
    clock.success()
    clock.failure(errno.EROFS, "/d/x", now=5.0, wall=5.0)
    assert clock.gave_up()  # a new fault reports it again


@pytest.mark.parametrize(
    ("faulted", "parked", "expected"),
    [(False, False, None), (True, False, 2.0), (False, True, 2.0), (True, True, 2.0)],
)
def test_idle_wait(faulted: bool, parked: bool, expected: float | None) -> None:
    clock = FaultClock(RetryPolicy(timeout=60.0, max_delay=2.0))
    if faulted:
        clock.failure(errno.ENOSPC, "/d", now=0.0, wall=0.0)
    assert clock.idle_wait(parked) == expected


@pytest.mark.parametrize(
    ("waited", "timeout", "says"),
    [
        (None, None, "; free space on it, then start again"),
        (61.0, 60.0, "not stored: it has refused writes for 61 s, storage.full_disk_timeout is 60 s"),
        (3.0, 60.0, "not stored: the service is stopping"),
    ],
)
def test_the_refusal_names_the_data_dir_the_error_and_the_setting(waited: float | None, timeout: float | None, says: str) -> None:
    error = StorageUnavailable("/srv/data", errno.ENOSPC, "No space left on device", waited=waited, timeout=timeout)
    assert str(error.condition) == "amqp:resource-limit-exceeded"
    assert error.description.startswith("data dir /srv/data cannot take writes: No space left on device (ENOSPC)")
    assert error.description.endswith(says)
