"""A small parser of the Prometheus text exposition format 0.0.4, for checking /metrics.

Strict about what sharedsub writes: ``# HELP``/``# TYPE`` before a family's samples, one TYPE
per family, sample names belonging to the family declared last, label values quoted with the
three escapes, values that parse as floats. Anything else raises ValueError naming the line.
"""

from __future__ import annotations

import re

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{(.*)\}})? (\S+)$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')

Labels = tuple[tuple[str, str], ...]


def _labels(text: str, line: str) -> Labels:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            raise ValueError(f"bad labels in {line!r}")
        value = re.sub(r"\\(.)", lambda e: {"n": "\n", "\\": "\\", '"': '"'}[e.group(1)], m.group(2))
        out.append((m.group(1), value))
        pos = m.end()
    return tuple(sorted(out))


def parse(text: str) -> tuple[dict[str, str], dict[tuple[str, Labels], float]]:
    """``(types by family, values by (sample name, sorted labels))`` of an exposition."""
    if not text.endswith("\n"):
        raise ValueError("an exposition ends with a newline")
    types: dict[str, str] = {}
    samples: dict[tuple[str, Labels], float] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            current = line.split()[2]
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if name in types or kind not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ValueError(f"bad TYPE line {line!r}")
            types[name] = kind
            current = name
            continue
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None or current is None or not m.group(1).startswith(current):
            raise ValueError(f"bad sample line {line!r}")
        key = (m.group(1), _labels(m.group(2) or "", line))
        if key in samples:
            raise ValueError(f"duplicate sample {line!r}")
        samples[key] = float(m.group(3))
    return types, samples


def value(samples: dict[tuple[str, Labels], float], name: str, **labels: str) -> float | None:
    """The sample ``name{labels}`` (None when absent)."""
    return samples.get((name, tuple(sorted(labels.items()))))
