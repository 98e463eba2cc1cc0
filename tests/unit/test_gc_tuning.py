"""sharedsub.core.ops.gc_tuning: the collector settings ``serve`` runs with (in a child process, so
this test process keeps its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sharedsub.core.ops.gc_tuning import THRESHOLDS
from tests.amqp_peer import wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_serving_raises_the_thresholds_and_freezes_what_start_up_made() -> None:
    code = (
        "import gc, json\n"
        "before = gc.get_freeze_count()\n"
        "from sharedsub.core.ops.gc_tuning import tune_for_serving\n"
        "tune_for_serving()\n"
        "print(json.dumps([list(gc.get_threshold()), before, gc.get_freeze_count()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    thresholds, before, after = json.loads(out.stdout)
    assert tuple(thresholds) == THRESHOLDS
    assert before == 0 and after > 1000  # the interpreter's and the imports' objects


def test_serve_calls_it_once_start_up_is_done() -> None:
    source = (ROOT / "sharedsub" / "serve.py").read_text(encoding="utf-8")
    call = source.index("tune_for_serving()")
    assert source.index("server.listen()") < call < source.index("server.run(on_started=announce)")


def _child_thresholds(*args: str) -> list[int]:
    """The collector thresholds the append child's ``main`` leaves (it returns when its stdin closes)."""
    code = (
        "import gc, json, sys\n"
        "from sharedsub.storage.commits.append_process import main\n"
        f"main({list(args)!r})\n"
        "print(json.dumps(list(gc.get_threshold())), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=True
    )
    thresholds: list[int] = json.loads(out.stderr.strip().splitlines()[-1])
    return thresholds


def test_the_append_child_tunes_its_collector_when_told() -> None:
    assert tuple(_child_thresholds("--gc-tuning")) == THRESHOLDS
    assert tuple(_child_thresholds()) != THRESHOLDS


def _command_line(pid: int) -> list[bytes]:
    """The arguments of process ``pid`` once it runs the append child (just after its start the
    kernel may show the parent's command line, or none while it execs)."""

    def args() -> list[bytes]:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")

    wait_for(lambda: b"sharedsub.storage.commits.append_process" in args(), 30, "the append child's exec")
    return args()


def test_the_append_process_tells_its_child_what_the_setting_says() -> None:
    from sharedsub.storage.commits.append_process import AppendProcess

    for tuning in (True, False):
        appends = AppendProcess(gc_tuning=tuning)
        appends.start()
        try:
            pid = appends.pid
            assert pid is not None
            args = _command_line(pid)
            assert (b"--gc-tuning" in args) is tuning
        finally:
            appends.stop()
