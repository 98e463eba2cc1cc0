"""The JSON log format (sharedsub/runtime/process/logformat.py): one object per line with the structured fields."""

from __future__ import annotations

import io
import json
import logging

from sharedsub.runtime.process.logformat import configure_logging


def test_json_lines() -> None:
    out = io.StringIO()
    configure_logging("DEBUG", "json", stream=out)
    try:
        log = logging.getLogger("sharedsub.test")
        log.info("batch %d: %d messages", 3, 10, extra={"topic": "orders", "routed": 7, "obj": object()})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
        log.debug("quiet")
    finally:
        configure_logging("WARNING", "text")
    # Only this test's logger: threads left by earlier tests in the same process may log too.
    lines = [d for d in (json.loads(line) for line in out.getvalue().splitlines()) if d["logger"] == "sharedsub.test"]
    assert len(lines) == 3
    first = lines[0]
    assert (first["level"], first["logger"], first["message"]) == ("INFO", "sharedsub.test", "batch 3: 10 messages")
    assert (first["topic"], first["routed"]) == ("orders", 7) and isinstance(first["obj"], str)
    assert first["ts"].endswith("Z") and "T" in first["ts"]
    assert "ValueError: boom" in lines[1]["exception"]
    assert lines[2]["level"] == "DEBUG"


def test_text_format_is_unchanged() -> None:
    out = io.StringIO()
    configure_logging("INFO", "text", stream=out)
    try:
        logging.getLogger("sharedsub.test").info("hello")
    finally:
        configure_logging("WARNING", "text")
    assert out.getvalue().rstrip().endswith("INFO sharedsub.test: hello")
