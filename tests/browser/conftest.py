"""The browser tier: headless Chromium (Debian's package, /usr/bin/chromium, which bootstrap.py
installs) driven by Playwright (the venv's pinned package; it never downloads a browser of its own),
one browser for the whole tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the tier (fails, not skips, without it: setup installs it)."""
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: run `python3 bootstrap.py setup` (it installs Debian's chromium)"
    with sync_playwright() as playwright:
        # --no-sandbox: the suite may run as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (its own context: no token or storage from another test) that fails the test
    on a script error."""
    # UTC: a datetime-local field the test fills means the same instant to the page and the test.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, timezone_id="UTC")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.set_default_timeout(30_000)
    try:
        yield tab
    finally:
        context.close()
    assert not errors, f"script errors on the page: {errors}"
