"""Delta appends in a child process, so that a commit does not wait for the service's GIL.

Why: the front end's reactor thread runs Python all the time under load, and a delta-rs append
needs the GIL many times while it writes (Arrow conversion, its Python wrapper, the commit's
properties). Inside the service a commit of a few hundred messages took about three times as long
as alone (bench/RESULTS.md, "GIL contention"). In a child process the commit has an interpreter
to itself; the committer thread only writes the rows to a pipe as an Arrow IPC stream and waits
for the answer, with the GIL released.

    appends = AppendProcess()
    appender = appends.appender(path, schema, fsync=True)   # like appender.DeltaAppender
    version = appender.append(table, commit_id=commit_id)
    appends.stop()

The contract of :meth:`ChildProcessAppender.append` is :meth:`appender.DeltaAppender.append`'s: the same
commit id on a retry finds a commit that landed although the try failed. If the child dies
during an append it is started again and the append retried once, told to look for its commit
after the last version this process saw, so rows are never written twice.

Wire (the child's stdin and stdout; little-endian lengths): a request is a u32 header length, a
JSON header, a u64 body length and the body (an Arrow IPC stream; for rows given as column lists,
header ``"rows": "pickle"``, the pickled ``(serialized schema, columns)`` of a
sharedsub.storage.commits.py_columns ``PyColumns``, converted to Arrow here, off the service's GIL;
empty for ``forget``); a reply is a u32 length and JSON ``{"version": N}`` or
``{"error": {"message", "errno", "not_synced"}}``. The pickle comes from the service that
started this child, over its own pipe: values a decoder of ours produced (str, bytes, int,
float, bool, None, datetime, lists, tuples and dicts of them), nothing a client wrote as pickle.

The child exits when its stdin closes and dies with its parent (PR_SET_PDEATHSIG on Linux): a
write of a service that was killed cannot land after another service started on the data dir.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import json
import logging
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any, BinaryIO

import pyarrow as pa
from deltalake.exceptions import CommitFailedError

from sharedsub.core.ops.gc_tuning import tune_for_serving
from sharedsub.core.publish.write_faults import fault_errno
from sharedsub.storage.commits.py_columns import PyColumns, as_table
from sharedsub.storage.delta.appender import CommitNotSynced, DeltaAppender, Fenced

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<I")
_BODY = struct.Struct("<Q")
_PR_SET_PDEATHSIG = 1


class AppendProcessDied(Exception):
    """The append child process exited during an append (after its one retry)."""


class ChildProcessAppendError(Exception):
    """An append failed in the child; the message is the child's (delta-rs's ``os error N``
    included, so sharedsub.core.publish.write_faults still recognises a storage fault)."""


def lost_commit_race(exc: BaseException) -> bool:
    """Whether an append failed only because other writers kept taking the table's next version
    (several members append to one shared ack log): the same append may be tried again later."""
    if isinstance(exc, CommitFailedError):
        return True
    return isinstance(exc, ChildProcessAppendError) and str(exc).startswith("CommitFailedError")


class AppendProcess:
    """The child process and the pipe to it; one request at a time (the committer is one thread,
    a lock makes other callers wait)."""

    def __init__(self, *, gc_tuning: bool = False) -> None:
        """``gc_tuning``: the child sets its garbage collector as ``serve`` does once started
        (sharedsub.core.ops.gc_tuning; ``[server] gc_tuning``)."""
        self._gc_tuning = gc_tuning
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._last_version: dict[str, int] = {}  # by table: newest version an append returned

    def appender(self, path: str, schema: pa.Schema, *, fsync: bool = False, epoch: int | None = None) -> ChildProcessAppender:
        """An appender of the table at ``path`` whose commits run in the child (under owner
        ``epoch``: see DeltaAppender)."""
        return ChildProcessAppender(self, path, schema, fsync, epoch)

    def start(self) -> None:
        """Start the child now (otherwise the first append does)."""
        with self._lock:
            self._ensure()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the pipe and wait for the child to exit (killed after ``timeout``)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "sharedsub.storage.commits.append_process", *(["--gc-tuning"] if self._gc_tuning else [])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
        return self._proc

    # Any: the pipe's JSON messages (module docstring): the reply is json.loads's; the header's "path" is read back as a key
    def request(self, header: dict[str, Any], body: bytes | pa.Buffer) -> dict[str, Any]:
        """Send one request and return the child's reply; a child that dies is started again and
        the request sent once more (``tried_after`` set, so an append that landed is found)."""
        with self._lock:
            for attempt in range(2):
                proc = self._ensure()
                try:
                    return self._exchange(proc, header, body)
                except (BrokenPipeError, ConnectionResetError, EOFError) as exc:
                    code = proc.wait()
                    self._proc = None
                    log.error("the append process (pid %d) exited with %s during an append", proc.pid, code)
                    if attempt == 1 or header.get("op") != "append":
                        raise AppendProcessDied(f"the append process exited with {code}") from exc
                    header = dict(header, tried_after=self._last_version.get(header["path"], -1))
            raise AssertionError("unreachable")

    @staticmethod
    # Any: as request()
    def _exchange(proc: subprocess.Popen[bytes], header: dict[str, Any], body: bytes | pa.Buffer) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        head = json.dumps(header).encode()
        proc.stdin.write(_HEADER.pack(len(head)) + head + _BODY.pack(len(body)))
        proc.stdin.write(body)
        proc.stdin.flush()
        raw = _read_exact(proc.stdout, _HEADER.size)
        reply: dict[str, Any] = json.loads(_read_exact(proc.stdout, _HEADER.unpack(raw)[0]))  # Any: json.loads's
        return reply

    def saw(self, path: str, version: int) -> None:
        """Record the newest version of ``path`` an append returned."""
        self._last_version[path] = max(version, self._last_version.get(path, -1))

    def forget(self, path: str) -> None:
        """The child drops its appender of ``path`` (the table was removed or failed)."""
        self._last_version.pop(path, None)
        if self._proc is not None:
            with contextlib.suppress(AppendProcessDied):
                self.request({"op": "forget", "path": path}, b"")


class ChildProcessAppender:
    """The :class:`Appender` of a store with a child process: ``DeltaAppender.append`` for one
    table, done by the child (the rows cross a pipe, pickled as column lists)."""

    def __init__(self, process: AppendProcess, path: str, schema: pa.Schema, fsync: bool, epoch: int | None = None) -> None:
        self.path = path
        self.schema = schema
        self._process = process
        self._fsync = fsync
        self._epoch = epoch

    def append(self, data: pa.Table | PyColumns, *, commit_id: str) -> int:
        """Commit ``data`` as one Delta commit in the child; the new version (column lists are
        converted to Arrow there).

        Raises:
            CommitNotSynced: the commit landed, its fsync failed (retry with the same id).
            ChildProcessAppendError: the append failed in the child (the child's message).
            AppendProcessDied: the child died twice during this append.
        """
        header: dict[str, object] = {
            "op": "append", "path": self.path, "commit_id": commit_id, "fsync": self._fsync, "epoch": self._epoch,
        }
        body: bytes | pa.Buffer
        if isinstance(data, PyColumns):
            header["rows"] = "pickle"
            body = pickle.dumps((data.schema.serialize().to_pybytes(), data.columns), protocol=pickle.HIGHEST_PROTOCOL)
        else:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, data.schema) as writer:
                writer.write_table(data)
            body = sink.getvalue()  # the Arrow buffer goes to the pipe as it is (no copy into a bytes object)
        reply = self._process.request(header, body)
        error = reply.get("error")
        if error is None:
            version = int(reply["version"])
            self._process.saw(self.path, version)
            return version
        cause: BaseException = ChildProcessAppendError(error["message"])
        if error.get("errno") is not None:
            cause = OSError(int(error["errno"]), error["message"])
        if error.get("not_synced") is not None:
            raise CommitNotSynced(self.path, int(error["not_synced"]), cause) from cause
        fenced = error.get("fenced")
        if fenced is not None:
            raise Fenced(self.path, int(fenced[0]), int(fenced[1]), int(fenced[2]))
        raise cause

    def close(self) -> None:
        """Forget this table in the child (after a failure, or when the table is removed)."""
        self._process.forget(self.path)


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError("the pipe closed")
    return data


def _die_with_parent() -> None:
    """Linux: be killed when the parent dies (a crashed service leaves no writer behind)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _error_reply(exc: BaseException) -> dict[str, object]:
    cause = exc.__cause__ if isinstance(exc, CommitNotSynced) and exc.__cause__ is not None else exc
    return {
        "error": {
            "message": f"{type(exc).__name__}: {exc}",
            # The parent tells a storage fault (a full disk, a store that does not answer) by it.
            "errno": cause.errno if isinstance(cause, OSError) and cause.errno is not None else fault_errno(cause),
            "not_synced": exc.version if isinstance(exc, CommitNotSynced) else None,
            "fenced": [exc.version, exc.theirs, exc.mine] if isinstance(exc, Fenced) else None,
        }
    }


# Tables whose appender keeps the next commit's files made ahead (DeltaAppender.prepare), the
# most recently appended to: two empty files beside each table, and a child appends to every topic.
MAX_AHEAD = 8


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """The child's loop: answer requests until ``requests`` closes."""
    appenders: dict[str, DeltaAppender] = {}
    try:
        _serve(requests, replies, appenders, collections.OrderedDict())
    finally:
        for appender in appenders.values():
            appender.finish()  # before the interpreter shuts down (DeltaAppender.finish)


def _serve(
    requests: BinaryIO, replies: BinaryIO, appenders: dict[str, DeltaAppender], ahead: collections.OrderedDict[str, None]
) -> None:
    """Answer requests; ``ahead``: the tables whose appender made files ahead, oldest first."""
    while True:
        raw = requests.read(_HEADER.size)
        if not raw or len(raw) < _HEADER.size:
            return
        header = json.loads(_read_exact(requests, _HEADER.unpack(raw)[0]))
        body = _read_exact(requests, _BODY.unpack(_read_exact(requests, _BODY.size))[0])
        path = header["path"]
        reply: dict[str, object]
        if header["op"] == "forget":
            ahead.pop(path, None)
            forgotten = appenders.pop(path, None)
            if forgotten is not None:
                forgotten.finish()
            reply = {"version": -1}
        else:
            appender = appenders.get(path)
            try:
                data = _rows(header, body)
                if appender is None:
                    epoch = header.get("epoch")
                    appender = appenders[path] = DeltaAppender(
                        path, data.schema, fsync=bool(header["fsync"]), epoch=int(epoch) if epoch is not None else None
                    )
                version = appender.append(data, commit_id=header["commit_id"], tried_after=header.get("tried_after"))
                reply = {"version": version}
            except Exception as exc:  # noqa: BLE001 (reported to the parent, which decides (retry, fail, park))
                reply = _error_reply(exc)
        out = json.dumps(reply).encode()
        replies.write(_HEADER.pack(len(out)) + out)
        replies.flush()
        if header["op"] == "append" and "error" not in reply and appender is not None:
            # The answer is on its way: a synchronous publisher's next message is not here yet.
            appender.prepare()
            ahead[path] = None
            ahead.move_to_end(path)
            while len(ahead) > MAX_AHEAD:
                appenders[ahead.popitem(last=False)[0]].unprepare()


def _rows(header: Mapping[str, object], body: bytes) -> pa.Table:
    """The rows of an append request as an Arrow table (see the module docstring's wire)."""
    if header.get("rows") == "pickle":
        schema_bytes, columns = pickle.loads(body)
        return as_table(PyColumns(_schema(schema_bytes), columns))
    return pa.ipc.open_stream(body).read_all()


@functools.lru_cache(maxsize=64)
def _schema(serialized: bytes) -> pa.Schema:
    """A schema the service sent (a few: the topic's, the catalog's, ...), read once."""
    return pa.ipc.read_schema(pa.py_buffer(serialized))


def main(argv: list[str] | None = None) -> None:
    """``python -m sharedsub.storage.commits.append_process [--gc-tuning]``: the child (started by
    AppendProcess)."""
    _die_with_parent()
    # Ctrl-C and a service's SIGTERM reach the whole process group: the child must outlive them
    # until the parent has drained its commits and closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--gc-tuning" in (sys.argv[1:] if argv is None else argv):
        # Unpickling a group's column lists allocates thousands of objects: with CPython's
        # thresholds the child ran a full collection every few commits, each scanning all that
        # its imports built (group_commit p99 36-39 ms against 25-26 with the tuning; publish of
        # 300,000 messages, alternating runs: bench/RESULTS.md,
        # "Cost per message (issue 31), session 9").
        tune_for_serving()
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
