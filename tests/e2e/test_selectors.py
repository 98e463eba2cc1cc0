"""JMS selectors end to end: python-qpid-proton consumers whose selectors read application
properties of every AMQP type and the JMS header fields; invalid selectors refused at attach."""

from __future__ import annotations

import uuid

import proton
import pytest
from proton import Message

from sharedsub.core.selector import MAX_DEPTH, MAX_NODES
from sharedsub.storage.catalog import load_catalog
from tests.amqp_peer import Subscriber, publish, wait_for
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e


def _messages() -> list[Message]:
    return [
        Message(
            body="m0",
            id="ID:m0",
            correlation_id="corr-0",
            subject="orders",
            priority=9,
            durable=True,
            group_id="g-1",
            creation_time=1700000000.0,
            properties={
                "color": "red",
                "b": proton.byte(-5),
                "s": proton.short(300),
                "i": proton.int32(70000),
                "l": 2**40,
                "ub": proton.ubyte(200),
                "ui": proton.uint(4000000000),
                "ul": proton.ulong(2**63 + 5),
                "f": proton.float32(1.5),
                "d": 2.25,
                "ok": True,
                "sym": proton.symbol("symbolic"),
                "ch": proton.char("x"),
            },
        ),
        Message(
            body="m1",
            id="ID:m1",
            correlation_id="corr-1",
            subject="invoices",
            priority=2,
            durable=False,
            group_id="g-2",
            creation_time=1800000000.0,
            properties={"color": "blue", "i": proton.int32(3), "d": -0.5, "ok": False, "unicode": "grüße ✓"},
        ),
        Message(body="m2", properties={"color": None, "i": "not a number"}),
    ]


CASES = [
    ("color = 'red'", {"m0"}),
    ("color <> 'red'", {"m1"}),  # null and missing never match
    ("color IS NULL", {"m2"}),
    ("b = -5 AND s = 300 AND i = 70000", {"m0"}),
    ("l = 1099511627776", {"m0"}),
    ("ub = 200 AND ui = 4000000000", {"m0"}),
    ("ul > 9000000000000000000", {"m0"}),  # a ulong above the long range compares as a number
    ("f = 1.5 AND d > 2", {"m0"}),
    ("d < 0", {"m1"}),
    ("ok = TRUE", {"m0"}),
    ("NOT ok", {"m1"}),
    ("sym = 'symbolic' AND ch = 'x'", {"m0"}),
    ("i > 1", {"m0", "m1"}),  # the string-typed i of m2 is a type mismatch: unknown
    ("unicode LIKE 'grü%'", {"m1"}),
    ("JMSPriority > 4", {"m0"}),
    ("JMSPriority = 4", {"m2"}),  # default priority
    ("JMSType = 'orders'", {"m0"}),
    ("JMSCorrelationID = 'corr-1'", {"m1"}),
    ("JMSMessageID IN ('ID:m0', 'ID:m1')", {"m0", "m1"}),
    ("JMSTimestamp = 1700000000000", {"m0"}),
    ("JMSDeliveryMode = 'PERSISTENT'", {"m0"}),
    ("JMSDeliveryMode = 'NON_PERSISTENT'", {"m1", "m2"}),
    ("JMSXGroupID LIKE 'g-%' AND JMSXGroupID <> 'g-2'", {"m0"}),
    ("color IN ('red', 'blue') AND i BETWEEN 2 AND 100000", {"m0", "m1"}),
    ("", {"m0", "m1", "m2"}),  # empty selector = no selector (A6.80)
]


def test_selectors_on_every_type_and_header(service: ServeProcess, topic: str) -> None:
    subs = [Subscriber(service.url, topic, selector=sel) for sel, _ in CASES]
    everything = Subscriber(service.url, topic)
    for s in [*subs, everything]:
        s.start()
    try:
        for s in [*subs, everything]:
            s.wait_attached()
        outcomes = publish(service.url, topic, _messages())
        assert {o.state for o in outcomes} == {"accepted"}
        publish(service.url, topic, [Message(body="END")])
        everything.wait_count(4)
        # One fan-out pass routes every subscription: once END reached the catch-all subscriber,
        # m0..m2 are in every subscription table, and each table commit is delivered whole.
        for s, (sel, want) in zip(subs, CASES, strict=True):
            wait_for(lambda s=s, want=want: {r.message.body for r in s.received} - {"END"} == want, 30, repr(sel))
    finally:
        for s in [*subs, everything]:
            s.stop()


@pytest.mark.parametrize(
    ("selector", "position"),
    [("color = ", 9), ("NULL = 0", 1), ("Cost LIKE 2", 11), ("a + 1", 1), ("color = 'red' AND (", 20)],
)
def test_invalid_selector_refused_and_nothing_created(
    service: ServeProcess, topic: str, selector: str, position: int
) -> None:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with Subscriber(
        service.url, topic, name=name, capabilities=["topic", "shared"], durable=2, expiry="never", selector=selector
    ) as s:
        cond, desc = s.wait_refused()
    assert cond == "amqp:invalid-field"
    assert selector in desc
    assert "position" in desc
    assert not [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]


@pytest.mark.parametrize(
    ("selector", "named"),
    [
        (
            "a = 1" + " = TRUE" * MAX_DEPTH,
            (
                f"expected an expression at most {MAX_DEPTH} operators deep (the selector depth limit), "
                f"found one {MAX_DEPTH + 2} deep"
            ),
        ),
        (
            # 8,193 nodes in ~19 KB: fits an attach frame (32 KiB with proton's defaults, which is
            # why a selector over the length limit cannot be sent in an attach to begin with).
            "NOT NOT " + " OR ".join(f"a={i}" for i in range((MAX_NODES + 1) // 4)),
            (
                f"at position 1: expected at most {MAX_NODES} operators and operands (the selector size limit), "
                f"found {MAX_NODES + 1}"
            ),
        ),
    ],
    ids=["too-deep", "too-many-nodes"],
)
def test_selector_over_a_limit_refused_naming_the_limit(
    service: ServeProcess, topic: str, selector: str, named: str
) -> None:
    """A selector past a tree or text limit is refused at attach like any invalid one, and the
    description says which limit and its value (a long selector is quoted cut, not echoed)."""
    name = f"limit-{uuid.uuid4().hex[:8]}"
    with Subscriber(
        service.url, topic, name=name, capabilities=["topic", "shared"], durable=2, expiry="never", selector=selector
    ) as s:
        cond, desc = s.wait_refused()
    assert cond == "amqp:invalid-field"
    assert named in desc
    assert len(desc) < 2000
    assert not [r for r in load_catalog(str(service.data_dir)).values() if r.identity.name == name]
