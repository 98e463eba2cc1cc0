"""sharedsub.runtime.gc_tuning: the collector settings ``serve`` runs with (in a child process, so
this test process keeps its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sharedsub.runtime.gc_tuning import THRESHOLDS

ROOT = Path(__file__).resolve().parents[2]


def test_serving_raises_the_thresholds_and_freezes_what_start_up_made() -> None:
    code = (
        "import gc, json\n"
        "before = gc.get_freeze_count()\n"
        "from sharedsub.runtime.gc_tuning import tune_for_serving\n"
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
