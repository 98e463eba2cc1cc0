"""The proton thread check (connectors/amqp/wire/reactor_thread.py): a proton call or release on
a thread other than the bound reactor's is reported, one on the reactor's is not, and work about
to be handed to another thread is found carrying a proton object where it does.

The check patches the process's ``cproton`` for good, so the cases that install it run in a
child interpreter of their own.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import proton

from connectors.amqp.wire.reactor_thread import REPORT_PREFIX, holds_proton

_CHILD = textwrap.dedent(
    """
    import sys, threading
    from connectors.amqp.wire import reactor_thread
    import proton
    reactor_thread.install(sys.argv[1])
    conn = proton.Connection()         # built before the loop runs: any thread may
    reactor_thread.bind()              # this thread is the reactor's from here
    conn.container = "on-the-reactor"  # allowed
    mode = sys.argv[2]
    def touch():
        if mode == "call":
            conn.state                 # a call into proton from another thread
        elif mode == "release":
            held.pop()                 # the last reference released on another thread: pn_decref
    held = [proton.Connection.wrap(conn._impl)] if mode == "release" else []
    if mode != "none":
        t = threading.Thread(target=touch, name="not-the-reactor")
        t.start(); t.join()
    print(reactor_thread.violations())
    """
)


def _run(tmp_path: Path, mode: str) -> tuple[int, list[str]]:
    reports = tmp_path / "reports"
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(reports), mode],
        capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2], check=True,
    )
    texts = [p.read_text() for p in sorted(reports.glob(f"{REPORT_PREFIX}*"))]
    return int(out.stdout.strip().splitlines()[-1]), texts


def test_a_call_on_another_thread_is_reported_with_its_function_and_thread(tmp_path: Path) -> None:
    count, texts = _run(tmp_path, "call")
    assert count == 1
    assert len(texts) == 1
    assert "pn_connection_state" in texts[0] and "'not-the-reactor'" in texts[0]
    assert "touch" in texts[0]  # the stack of the offending call


def test_a_release_on_another_thread_is_reported_as_its_decref(tmp_path: Path) -> None:
    count, texts = _run(tmp_path, "release")
    assert count == 1
    assert "pn_decref" in texts[0]


def test_calls_on_the_reactor_thread_report_nothing(tmp_path: Path) -> None:
    count, texts = _run(tmp_path, "none")
    assert (count, texts) == (0, [])


def _keep(*_args: object) -> None:
    """A stand-in for work handed to another thread."""


def test_work_carrying_a_proton_object_is_found_however_it_is_wrapped() -> None:
    conn = proton.Connection()

    def closure() -> None:
        _keep(conn)

    assert holds_proton(conn)
    assert holds_proton(closure)
    assert holds_proton(functools.partial(_keep, 1, conn))
    assert holds_proton(lambda: closure())  # a closure over a closure that holds it
    assert holds_proton((1, [conn]))
    assert holds_proton({"link": conn})


def test_work_carrying_ints_and_plain_values_is_not() -> None:
    token = 7

    def closure() -> None:
        _keep(token, "key")

    assert not holds_proton(closure)
    assert not holds_proton(functools.partial(_keep, token, frozenset({1, 2})))
    assert not holds_proton(_keep)
    assert not holds_proton(None)
