"""The SASL state machine (sharedsub/core/security/sasl_rules.py) as tables; every case is also fed 1 and 7
bytes at a time."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharedsub.core.security import sasl_frames as sf
from sharedsub.core.security import scram
from sharedsub.core.security.sasl_rules import SaslExchange, SaslPolicy, anonymous_allowed

ALICE = {m: scram.derive("alice-pw", m) for m in scram.STORED}
USERS = {"alice": ALICE}


def lookup(name: str) -> dict[str, scram.Credential]:
    return USERS.get(name, {})


POLICY = SaslPolicy(users=lookup, external=True, external_user=lambda cn: cn if cn in USERS else None)
ANON = SaslPolicy(users=lookup, anonymous=True)
H = sf.SASL_HEADER
AMQP = sf.AMQP_HEADER + b"\x00\x00\x00\x08\x02\x00\x00\x00"  # a pipelined AMQP header + an empty frame

Step = bytes | Callable[[bytes], bytes]


def run(policy: SaslPolicy, steps: list[Step], *, split: int | None = None, encrypted: bool = False,
        subject: str | None = None) -> tuple[SaslExchange, list[sf.Frame]]:
    """Drive an exchange with ``steps`` (bytes, or a function of what the server sent so far);
    return it and the frames the server sent."""
    ex = SaslExchange(policy, encrypted=encrypted, peer_subject=subject)
    sent = bytearray()
    for step in steps:
        data = step(bytes(sent)) if callable(step) else step
        for i in range(0, len(data), split or len(data) or 1):
            ex.feed(data[i : i + (split or len(data))])
        sent += ex.take_output()
    frames, buf = [], bytes(sent[8:] if sent.startswith(H) else sent)
    while buf:
        frame, used = sf.decode(buf)
        assert frame is not None
        frames.append(frame)
        buf = buf[used:]
    return ex, frames


def last_challenge(sent: bytes) -> bytes:
    buf, challenge = sent[8:], b""
    while buf:
        frame, used = sf.decode(buf)
        assert frame is not None
        if frame.code == sf.CHALLENGE:
            challenge = frame.field(0)
        buf = buf[used:]
    return challenge


def scram_steps(mech: str, user: str, password: str) -> tuple[scram.ScramClient, list[Step]]:
    c = scram.ScramClient(mech, user, password)
    return c, [H + sf.init(mech, c.first()), lambda sent: sf.response(c.final(last_challenge(sent)))]


# name: (policy, client steps, ok, user)
CASES: dict[str, tuple[SaslPolicy, list[Step], bool, str | None]] = {
    "plain": (POLICY, [H + sf.init("PLAIN", b"\0alice\0alice-pw")], True, "alice"),
    "plain, authzid = authcid": (POLICY, [H + sf.init("PLAIN", b"alice\0alice\0alice-pw")], True, "alice"),
    "plain, no initial response": (POLICY, [H + sf.init("PLAIN"), sf.response(b"\0alice\0alice-pw")], True, "alice"),
    "plain, wrong password": (POLICY, [H + sf.init("PLAIN", b"\0alice\0nope")], False, None),
    "plain, unknown user": (POLICY, [H + sf.init("PLAIN", b"\0bob\0x")], False, None),
    "plain, another authzid": (POLICY, [H + sf.init("PLAIN", b"root\0alice\0alice-pw")], False, None),
    "plain, malformed": (POLICY, [H + sf.init("PLAIN", b"alice-pw")], False, None),
    "plain, not UTF-8": (POLICY, [H + sf.init("PLAIN", b"\0alice\0\xff")], False, None),
    "plain not configured": (SaslPolicy(users=lookup, mechanisms=("SCRAM-SHA-256",)),
                             [H + sf.init("PLAIN", b"\0alice\0alice-pw")], False, None),
    "anonymous, not offered": (POLICY, [H + sf.init("ANONYMOUS", b"trace")], False, None),
    "anonymous, offered": (ANON, [H + sf.init("ANONYMOUS", b"trace")], True, None),
    "anonymous offered, plain still checked": (ANON, [H + sf.init("PLAIN", b"\0alice\0nope")], False, None),
    "external without a certificate": (POLICY, [H + sf.init("EXTERNAL", b"")], False, None),
    "unknown mechanism": (POLICY, [H + sf.init("CRAM-MD5", b"")], False, None),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("split", [None, 1, 7])
def test_exchanges(name: str, split: int | None) -> None:
    policy, steps, ok, user = CASES[name]
    ex, frames = run(policy, steps, split=split)
    assert ex.done and ex.ok is ok and ex.user == user, ex.reason
    assert frames[0].code == sf.MECHANISMS
    assert frames[-1].code == sf.OUTCOME and frames[-1].field(0) == (sf.OK if ok else sf.AUTH)
    if not ok:
        assert ex.reason and "alice-pw" not in ex.reason and "nope" not in ex.reason


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("password", "ok"), [("alice-pw", True), ("wrong", False)])
@pytest.mark.parametrize("split", [None, 3])
def test_scram(mech: str, password: str, ok: bool, split: int | None) -> None:
    client, steps = scram_steps(mech, "alice", password)
    ex, frames = run(POLICY, steps, split=split)
    assert [f.code for f in frames] == [sf.MECHANISMS, sf.CHALLENGE, sf.OUTCOME]
    assert ex.ok is ok and ex.mechanism == mech
    if ok:  # the server-final goes in the outcome's additional-data (Qpid JMS checks it there)
        assert ex.user == "alice" and client.verify(frames[-1].field(1))
    else:
        assert frames[-1].field(0) == sf.AUTH and frames[-1].field(1) is None


def test_scram_unknown_user_looks_like_a_known_one_until_the_end() -> None:
    _, steps = scram_steps("SCRAM-SHA-256", "mallory", "x")
    ex, frames = run(POLICY, steps)
    assert [f.code for f in frames] == [sf.MECHANISMS, sf.CHALLENGE, sf.OUTCOME] and not ex.ok


@pytest.mark.parametrize(
    ("policy", "encrypted", "subject", "offered"),
    [
        (POLICY, False, None, ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]),
        (POLICY, True, "alice", ["EXTERNAL", "SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]),
        (SaslPolicy(external=False), True, "alice", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]),
        (ANON, False, None, ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "ANONYMOUS"]),
        (SaslPolicy(mechanisms=("PLAIN", "SCRAM-SHA-256")), False, None, ["SCRAM-SHA-256", "PLAIN"]),
        (SaslPolicy(mechanisms=(), anonymous=True), False, None, ["ANONYMOUS"]),
    ],
)
def test_offered(policy: SaslPolicy, encrypted: bool, subject: str | None, offered: list[str]) -> None:
    ex = SaslExchange(policy, encrypted=encrypted, peer_subject=subject)
    assert ex.offered() == offered
    ex.feed(H)
    frame, _ = sf.decode(ex.take_output()[8:])
    assert frame is not None and sf.mechanism_list(frame) == offered


@pytest.mark.parametrize(
    ("subject", "authzid", "ok", "user"),
    [("alice", b"", True, "alice"), ("alice", b"alice", True, "alice"), ("alice", b"root", False, None),
     ("eve", b"", False, None)],
)
def test_external(subject: str, authzid: bytes, ok: bool, user: str | None) -> None:
    ex, _ = run(POLICY, [H + sf.init("EXTERNAL", authzid)], encrypted=True, subject=subject)
    assert (ex.ok, ex.user) == (ok, user)


def test_pipelined_amqp_after_the_deciding_frame_is_leftover() -> None:
    ex, _ = run(POLICY, [H + sf.init("PLAIN", b"\0alice\0alice-pw") + AMQP])
    assert ex.ok and ex.leftover == AMQP
    ex.feed(b"more")
    assert ex.leftover == AMQP + b"more"


@pytest.mark.parametrize(
    ("policy", "first", "ok", "answer"),
    [
        (POLICY, sf.AMQP_HEADER, False, sf.SASL_HEADER),  # SASL required: our header, then closed
        (ANON, sf.AMQP_HEADER, True, b""),  # anonymous allowed: no SASL layer is fine
        (ANON, b"AMQP\x02\x01\x00\x00", False, sf.SASL_HEADER),  # TLS upgrade header: not supported
        (ANON, b"\x16\x03\x01\x02\x00\x01\x00\x01", False, b""),  # a TLS ClientHello on the amqp port
        (ANON, b"GET / HTTP/1.1\r\n", False, b""),
    ],
)
def test_protocol_headers(policy: SaslPolicy, first: bytes, ok: bool, answer: bytes) -> None:
    ex = SaslExchange(policy)
    ex.feed(first + b"\x00\x00\x00\x08\x02\x00\x00\x00")
    assert ex.done and ex.ok is ok and ex.take_output() == answer
    if ok:
        assert ex.user is None and ex.mechanism is None and ex.leftover.startswith(sf.AMQP_HEADER)


@pytest.mark.parametrize(
    "after_header",
    [
        b"\x00\x00\x00\x10\x02\x00\x00\x00" + b"\x00" * 8,  # an AMQP frame where SASL was due
        sf.response(b"x"),  # a response before the init
        sf.outcome(sf.OK),  # a server's frame
    ],
)
def test_frames_out_of_place_close_without_an_outcome(after_header: bytes) -> None:
    ex = SaslExchange(POLICY)
    ex.feed(H + after_header)
    ex.take_output()
    ex.feed(b"more")
    assert ex.done and not ex.ok and ex.take_output() == b"" and ex.leftover == b""


def test_peer_closing_midway_fails() -> None:
    ex = SaslExchange(POLICY)
    ex.feed(H)
    ex.eof()
    assert ex.done and not ex.ok and "closed" in ex.reason


@pytest.mark.parametrize(
    ("mode", "have_users", "allowed"),
    [("auto", False, True), ("auto", True, False), ("true", True, True), ("false", False, False)],
)
def test_anonymous_allowed(mode: str, have_users: bool, allowed: bool) -> None:
    assert anonymous_allowed(mode, have_users) is allowed
