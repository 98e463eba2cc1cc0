"""The fan-out's announcement of the subscription tables a micro-batch committed; pure.

With ``--announce-routed`` the fan-out job prints one line on its stdout after each batch (or
retry) that committed rows: :data:`ROUTED_LINE`, a space, and the tables' paths relative to the
data dir as a JSON list. ``sharedsub serve`` reads its child's lines and wakes its tailer for
exactly those tables (sharedsub.runtime.tailer ``Tailer.hint``), so a tailer watching a
thousand subscriptions probes the tables that got rows, not all of them, after each batch
(issue 41: the probes of every table were most of the front end's CPU). The bare line (no
list) means "any table": the tailer probes every table it watches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

ROUTED_LINE = "sharedsub fanout routed"


def routed_line(tables: Iterable[str]) -> str:
    """The line announcing ``tables`` (relative paths), sorted."""
    return f"{ROUTED_LINE} {json.dumps(sorted(set(tables)), separators=(',', ':'))}"


def parse_routed(line: str) -> tuple[bool, frozenset[str] | None]:
    """Whether a line of the job's stdout is a routed line, and the tables it announces
    (relative paths; ``None`` for "any table": the bare line, or a list that does not parse)::

        line                                         answer
        -------------------------------------------  ----------------------------------
        sharedsub fanout routed                      (True, None)
        sharedsub fanout routed ["a/g1","b/g1"]      (True, frozenset({"a/g1", "b/g1"}))
        sharedsub fanout routed [broken              (True, None)
        sharedsub fanout running                     (False, None)
    """
    if line == ROUTED_LINE:
        return True, None
    if not line.startswith(ROUTED_LINE + " "):
        return False, None
    try:
        tables = json.loads(line[len(ROUTED_LINE) + 1 :])
    except ValueError:
        return True, None
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        return True, None
    return True, frozenset(tables)
