"""The web console (docs/console.md) in a real browser, against a real ``sharedsub serve`` fed by
rhea clients (a client we did not write; tests/rhea/console_clients.js).

One service for the module, the tests in order: actions refused without the token, a topic
created from the console, the pages against what the CLI prints for the same data dir, a backlog
browsed with a selector, a replay started from the history timeline re-delivering to an attached
rhea consumer. The README's screenshots (docs/console-*.png) are taken here. A ``frontend`` with
``[server] console = "token"`` and one with ``"off"`` show the other access modes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from sharedsub.runtime.discovery import read_service_file
from tests.service import ROOT, ServeProcess

pytestmark = pytest.mark.e2e

TOPIC = "orders"
SUBSCRIPTION = "audit"  # shared durable, global: its display name is global:audit
MESSAGES = 30  # every third is red (n % 3 == 0)
RED = [n for n in range(MESSAGES) if n % 3 == 0]
RHEA = ROOT / "tests" / "rhea"
DOCS = ROOT / "docs"
ENV = {"SHAREDSUB_SERVER_CONSOLE_REFRESH": "1", "SHAREDSUB_SERVER_METRICS_BACKLOG_INTERVAL": "0.5"}


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = ServeProcess(tmp_path_factory.mktemp("console") / "data", env=ENV).start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]


def _info(svc: ServeProcess) -> tuple[str, str]:
    info = read_service_file(str(svc.data_dir))
    assert info is not None and info.admin_url and info.admin_token
    return info.admin_url, info.admin_token


def _get(url: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _cli(svc: ServeProcess, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "sharedsub", *args, "--data-dir", str(svc.data_dir), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(done.stdout)


def _rhea(svc: ServeProcess, mode: str) -> subprocess.Popen[str]:
    env = dict(
        os.environ,
        SHAREDSUB_URL=svc.url,
        SHAREDSUB_TOPIC=TOPIC,
        SHAREDSUB_SUBSCRIPTION=SUBSCRIPTION,
        SHAREDSUB_MESSAGES=str(MESSAGES),
    )
    script = str(RHEA / "console_clients.js")
    return subprocess.Popen(["node", script, mode], cwd=RHEA, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _line(proc: subprocess.Popen[str], key: str, timeout: float) -> dict[str, Any]:
    """The next JSON line of ``proc`` (it must carry ``key``)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            doc: dict[str, Any] = json.loads(line)
            assert key in doc, doc
            return doc
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"rhea gave no {key!r} line (exit {proc.poll()}): {proc.stderr.read() if proc.stderr else ''}")


def _sign_in(page: Page, token: str, *, asked: bool = False) -> None:
    """Sign in through the token dialog (``asked``: the page opened it itself, after a 401)."""
    if asked:
        expect(page.locator("#token-dialog")).to_be_visible()
    else:
        page.click("#signin")
    page.fill("#token-input", token)
    page.click("#token-save")
    expect(page.locator("#access")).to_have_text("admin", ignore_case=True)


def _cli_backlog(svc: ServeProcess) -> dict[str, Any]:
    (found,) = [b for b in _cli(svc, "backlog") if b["name"] == f"global:{SUBSCRIPTION}"]
    return found


def test_actions_and_message_contents_need_the_token(svc: ServeProcess, page: Page) -> None:
    url, token = _info(svc)
    page.goto(f"{url}/console#/")
    expect(page.locator("#access")).to_have_text("read-only", ignore_case=True)
    expect(page.locator("#topic-create")).to_have_count(0)  # no action offered without the token
    # What a page could send without the token is refused, and creates nothing.
    status = page.evaluate(
        """async () => (await fetch('/admin/topics/create', {method: 'POST',
             headers: {'Content-Type': 'application/json'}, body: JSON.stringify({topic: 'sneaky'})})).status"""
    )
    assert status == 401
    assert _get(f"{url}/console/api/browse?subscription=x")[0] == 401
    assert _get(f"{url}/console/api/overview")[0] == 200  # figures are open in read-only mode
    # A wrong token is refused and not kept.
    page.click("#signin")
    page.fill("#token-input", "not-the-token")
    page.click("#token-save")
    expect(page.locator("#status")).to_contain_text("refused")
    expect(page.locator("#access")).to_have_text("read-only", ignore_case=True)
    assert page.evaluate("sessionStorage.getItem('sharedsub.console.token')") is None
    assert "sneaky" not in [t["name"] for t in _get(f"{url}/console/api/overview", token)[1]["topics"]]


def test_a_topic_is_created_from_the_console(svc: ServeProcess, page: Page) -> None:
    url, token = _info(svc)
    page.goto(f"{url}/console#/")
    _sign_in(page, token)
    assert token not in page.content()  # the token is never written into the page
    page.fill("#topic-create-name", TOPIC)
    page.click("#topic-create")
    expect(page.locator(f'#topics tr[data-topic="{TOPIC}"]')).to_have_count(1)
    assert [t["name"] for t in _cli(svc, "topics", "list")] == [TOPIC]


def test_the_pages_show_what_the_cli_prints(svc: ServeProcess, page: Page) -> None:
    url, _token = _info(svc)
    setup = _rhea(svc, "setup")
    assert _line(setup, "published", 120) == {"published": MESSAGES}
    assert setup.wait(30) == 0
    deadline = time.monotonic() + 120
    while _cli_backlog(svc)["messages"] < MESSAGES and time.monotonic() < deadline:
        time.sleep(0.5)
    backlog = _cli_backlog(svc)
    assert backlog["messages"] == MESSAGES
    listed = {s["name"]: s for s in _cli(svc, "subscriptions", "list")}
    cli = listed[f"global:{SUBSCRIPTION}"]

    page.goto(f"{url}/console#/")
    row = page.locator(f'#subscriptions tr[data-subscription="{cli["key"]}"]')
    expect(row.locator("td.backlog")).to_have_text(str(backlog["messages"]))
    expect(row.locator("td.consumers")).to_have_text(str(len(cli["consumers"])))
    expect(row.locator("td.topic")).to_have_text(TOPIC)
    topic_row = page.locator(f'#topics tr[data-topic="{TOPIC}"]')
    expect(topic_row.locator("td.published")).to_have_text(str(MESSAGES))
    expect(topic_row.locator("td.subscriptions")).to_have_text("1")
    expect(page.locator('#fanout [data-field="state"]')).to_have_text("running")
    expect(page.locator('#storage [data-field="writable"]')).to_have_text("yes")
    page.screenshot(path=str(DOCS / "console-overview.png"))

    row.locator("td.name a").click()
    expect(page.locator("#title")).to_have_text(f"global:{SUBSCRIPTION}")
    expect(page.locator('[data-field="backlog"]')).to_have_text(str(backlog["messages"]))
    expect(page.locator('[data-field="consumers"]')).to_have_text("0")
    expect(page.locator('[data-field="generation"]')).to_have_text(str(cli["generation"]))
    expect(page.locator('[data-field="selector"]')).to_have_text("(none)")
    for part in backlog["partitions"]:
        expect(page.locator(f'#partitions tr[data-partition="{part["partition"]}"]')).to_contain_text(str(part["messages"]))
    page.click(f'a[href="#/topic/{TOPIC}"]')
    expect(page.locator("#title")).to_have_text(TOPIC)
    expect(page.locator('[data-field="partitions"]')).to_have_text("1")


def test_a_backlog_is_browsed_with_a_selector(svc: ServeProcess, page: Page) -> None:
    url, token = _info(svc)
    key = _cli_backlog(svc)["key"]
    page.goto(f"{url}/console#/subscription/{key}")
    _sign_in(page, token)
    page.fill("#browse-selector", "color = 'red'")
    page.click("#browse-run")
    rows = page.locator("#messages tr[data-seq]")
    expect(rows).to_have_count(len(RED))
    ids = [rows.nth(i).locator("td.message-id").inner_text() for i in range(len(RED))]
    assert ids == [f"m-{n}" for n in RED]
    expect(rows.first.locator("td.properties")).to_contain_text("color=red")
    # A selector that does not parse is answered with where it went wrong; nothing is listed.
    page.fill("#browse-selector", "color = ")
    page.click("#browse-run")
    expect(page.locator("#browse-error")).to_contain_text("invalid JMS selector")
    page.fill("#browse-selector", "n >= 25")
    page.click("#browse-run")
    expect(rows).to_have_count(MESSAGES - 25)
    # Pages: 50 a page by default; the API pages too (the cursor is the last seq shown).
    first = _get(f"{url}/console/api/browse?subscription={key}&limit=7", token)[1]
    second = _get(f"{url}/console/api/browse?subscription={key}&limit=7&after={first['next']}", token)[1]
    assert [m["message_id"] for m in first["messages"] + second["messages"]] == [f"m-{n}" for n in range(14)]


def test_a_replay_started_from_the_timeline_redelivers_to_an_attached_consumer(svc: ServeProcess, page: Page) -> None:
    url, token = _info(svc)
    key = _cli_backlog(svc)["key"]
    consumer = _rhea(svc, "replay")
    try:
        assert _line(consumer, "drained", 120) == {"drained": MESSAGES}
        deadline = time.monotonic() + 60
        while _cli_backlog(svc)["messages"] and time.monotonic() < deadline:
            time.sleep(0.5)  # the acknowledgements reach the ack log
        assert _cli_backlog(svc)["messages"] == 0
        page.goto(f"{url}/console#/subscription/{key}")
        _sign_in(page, token)
        expect(page.locator('[data-field="consumers"]')).to_have_text("1")
        expect(page.locator("#consumers tr[data-link]")).to_have_count(1)
        link = page.locator("#consumers tr[data-link]").get_attribute("data-link")
        assert link == f"{SUBSCRIPTION}|global"
        # The connections page: the rhea consumer's connection with its link, and the catalog's record.
        page.click('a[data-nav="connections"]')
        consumer_links = page.locator("#connections tr.link", has_text=link)
        expect(consumer_links).to_have_count(1)
        expect(consumer_links).to_contain_text("consumer")
        expect(page.locator("#recorded-consumers")).to_contain_text(key)
        page.goto(f"{url}/console#/subscription/{key}")
        oldest = page.locator("#history li[data-version]").last  # newest first: the first version
        expect(oldest).to_have_attribute("data-version", "0")
        expect(oldest).to_contain_text("row(s) added")  # from the log's statistics
        history = _get(f"{url}/console/api/history?subscription={key}")[1]["versions"]
        assert sum(v["rows_added"] or 0 for v in history if v["operation"] == "WRITE") == MESSAGES
        oldest.locator("button.replay").click()
        expect(page.locator("#confirm")).to_be_visible()
        page.click("#confirm-ok")
        expect(page.locator("#action-result")).to_contain_text("replay", ignore_case=True)
        assert _line(consumer, "replayed", 180) == {"replayed": MESSAGES}
        assert consumer.wait(30) == 0, consumer.stderr.read() if consumer.stderr else ""
        page.reload()
        expect(page.locator('[data-field="redelivered"]')).to_have_text(str(MESSAGES))
        page.screenshot(path=str(DOCS / "console-subscription.png"), full_page=True)
    finally:
        if consumer.poll() is None:
            consumer.kill()


def test_a_replay_from_a_time_reopens_the_backlog(svc: ServeProcess, page: Page) -> None:
    """After the consumer above acknowledged everything twice and went: a replay from a time
    after the last commit (the page's clock is UTC: see conftest) re-opens the 30 messages."""
    url, token = _info(svc)
    assert _cli_backlog(svc)["messages"] == 0
    key = _cli_backlog(svc)["key"]
    page.goto(f"{url}/console#/subscription/{key}")
    _sign_in(page, token)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)
    page.fill("#replay-time", later.strftime("%Y-%m-%dT%H:%M"))
    page.click("#replay-time-run")
    expect(page.locator("#confirm")).to_be_visible()
    page.click("#confirm-ok")
    expect(page.locator("#action-result")).to_contain_text("replay", ignore_case=True)
    deadline = time.monotonic() + 60
    while _cli_backlog(svc)["messages"] < MESSAGES and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _cli_backlog(svc)["messages"] == MESSAGES
    expect(page.locator('[data-field="backlog"]')).to_have_text(str(MESSAGES))


def test_nothing_a_console_request_sends_stops_the_service(svc: ServeProcess) -> None:
    url, token = _info(svc)
    key = _cli_backlog(svc)["key"]
    refused = {
        f"/console/api/browse?subscription={key}&limit=100000": 400,  # over the page bound
        f"/console/api/browse?subscription={key}&after=x": 400,
        f"/console/api/browse?subscription={key}&selector=" + "(" * 5000: 400,  # the selector limits
        "/console/api/browse?subscription=nope": 404,
        "/console/api/subscription?name=nope": 404,
        "/console/api/subscription": 400,
        "/console/api/topic?name=nope": 404,
        "/console/api/history?subscription=nope": 404,
        "/console/static/../../../etc/passwd": 404,
    }
    for path, status in refused.items():
        got, body = _get(url + path, token)
        assert (got, body.get("ok")) == (status, False), (path, body)
    assert _get(f"{url}/console/api/overview", token)[0] == 200


def test_a_subscription_is_deleted_and_its_topic_dropped_from_the_console(svc: ServeProcess, page: Page) -> None:
    """The last actions on the module's service: unsubscribe (no consumer is attached now), then
    drop the topic, which has no subscription left."""
    url, token = _info(svc)
    key = _cli_backlog(svc)["key"]
    page.goto(f"{url}/console#/subscription/{key}")
    _sign_in(page, token)
    page.click("#unsubscribe")
    page.click("#confirm-ok")
    expect(page.locator("#title")).to_have_text("Overview")  # back on the overview
    expect(page.locator(f'#subscriptions tr[data-subscription="{key}"]')).to_have_count(0)
    assert [s["key"] for s in _cli(svc, "subscriptions", "list")] == []
    page.goto(f"{url}/console#/topic/{TOPIC}")
    page.click("#topic-drop")
    page.click("#confirm-ok")
    expect(page.locator(f'#topics tr[data-topic="{TOPIC}"]')).to_have_count(0)
    assert _cli(svc, "topics", "list") == []


@pytest.mark.parametrize("access", ["token", "off"])
def test_the_console_can_be_closed_without_the_token_or_turned_off(
    access: str, tmp_path: Path, page: Page
) -> None:
    env = {"SHAREDSUB_SERVER_CONSOLE": access}
    proc = ServeProcess(tmp_path / "data", command="frontend", env=env).start()
    try:
        url, token = _info(proc)
        if access == "off":
            assert _get(f"{url}/console/api/session")[0] == 404
            assert page.goto(f"{url}/console").status == 404  # type: ignore[union-attr]
            return
        assert _get(f"{url}/console/api/overview")[0] == 401
        assert _get(f"{url}/console/api/overview", token)[0] == 200
        page.goto(f"{url}/console#/")
        expect(page.locator("body")).to_contain_text("needs the admin token")
        expect(page.locator("#topics")).to_have_count(0)
        _sign_in(page, token, asked=True)
        expect(page.locator("#topics")).to_have_count(1)
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]
