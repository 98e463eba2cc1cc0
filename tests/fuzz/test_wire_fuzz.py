"""Wire fuzzer against a real ``sharedsub serve``: no client can stop the service, nothing
accepted is lost.

For a bounded time (WIRE_SECONDS) it publishes mutated messages mixed with valid ones (each
with a unique id) through python-qpid-proton, and sends mutated raw AMQP byte streams (header,
open, begin, attach, flow-less transfer) over plain sockets. Then: the process is alive, its
log has no Traceback, a fresh publisher and subscriber work, and every transfer that was
*accepted* reached the unshared durable subscription exactly once (rejected ones never).
The run's seed (tests/fuzz/seed.py) drives every random choice.
"""

from __future__ import annotations

import collections
import random
import socket
import time
import urllib.parse
from pathlib import Path

import proton
import pytest
from proton import Connection, Message, Transport

from sharedsub.storage.topics import create_topic
from tests.amqp_peer import Subscriber, jms_durable, publish, uid, wait_for
from tests.fuzz.messages import ingest
from tests.fuzz.seed import REPLAY, SEED
from tests.service import ServeProcess

pytestmark = pytest.mark.e2e

WIRE_SECONDS = 30.0


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    out = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        n = len(out)
        op = rng.choice(["flip", "set", "truncate", "insert", "delete", "duplicate"])
        if op == "flip" and n:
            out[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == "set" and n:
            out[rng.randrange(n)] = rng.choice([0x00, 0x40, 0x45, 0x53, 0xA1, 0xB0, 0xC0, 0xD0, 0xFF, rng.randrange(256)])
        elif op == "truncate":
            del out[rng.randrange(n + 1) :]
        elif op == "insert":
            i = rng.randrange(n + 1)
            out[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == "delete" and n:
            i = rng.randrange(n)
            del out[i : i + rng.randint(1, 8)]
        elif op == "duplicate" and n:
            i = rng.randrange(n)
            out[i:i] = out[i : i + rng.randint(1, 16)]
    return bytes(out)


def _message(rng: random.Random, n: int) -> bytes:
    msg = Message(
        id=f"fz-{SEED}-{n}",
        body=rng.choice([f"body {n}", b"\x00\x01" * rng.randint(0, 8), [n, "x"], {"n": n}, None]),
        subject=rng.choice([None, "a.b", "c"]),
        properties=rng.choice([None, {"k": n, "s": "v", "f": 1.5}, {"routing-key": "r.k", "b": True}]),
        durable=rng.random() < 0.5,
        priority=rng.randrange(10),
        creation_time=rng.choice([0, time.time(), 2**40]),
    )
    return bytes(msg.encode())


def _sections(raw: bytes) -> list[bytes]:
    data, out, view = proton.Data(), [], memoryview(raw)
    offset = 0
    while offset < len(raw):
        data.clear()
        used = data.decode(view[offset:])
        out.append(raw[offset : offset + used])
        offset += used
    return out


def _fuzzed_message(rng: random.Random, n: int) -> bytes:
    raw = _message(rng, n)
    kind = rng.random()
    if kind < 0.3:
        return raw
    if kind < 0.45:  # reorder / repeat / drop whole sections
        parts = _sections(raw)
        rng.shuffle(parts)
        if rng.random() < 0.5:
            parts.append(rng.choice(parts))
        if len(parts) > 1 and rng.random() < 0.3:
            parts.pop(rng.randrange(len(parts)))
        return b"".join(parts)
    return _mutate(rng, raw)


def _client_stream(address: str, payload: bytes) -> bytes:
    """The bytes a proton client sends to publish ``payload`` to ``address``: AMQP header, open,
    begin, attach, transfer. Built in memory against a proton server transport (no network),
    which answers and grants the credit the transfer needs."""
    client, server = Connection(), Connection()
    client.container = f"raw-{SEED}"
    ct, st = Transport(), Transport(Transport.SERVER)
    ct.bind(client)
    st.bind(server)
    captured = bytearray()

    def pump() -> None:
        for _ in range(20):
            moved = False
            out = ct.peek(ct.pending()) if ct.pending() > 0 else b""
            if out:
                captured.extend(out)
                st.push(out)
                ct.pop(len(out))
                moved = True
            back = st.peek(st.pending()) if st.pending() > 0 else b""
            if back:
                ct.push(back)
                st.pop(len(back))
                moved = True
            if not moved:
                return

    client.open()
    ssn = client.session()
    ssn.open()
    snd = ssn.sender("raw-sender")
    snd.target.address = address
    snd.open()
    pump()
    server.open()
    s = server.session_head(0)
    while s:
        s.open()
        s = s.next(0)
    link = server.link_head(0)
    while link:
        link.open()
        if link.is_receiver:
            link.flow(10)
        link = link.next(0)
    pump()
    dlv = snd.delivery(b"raw-1")
    snd.send(payload)
    snd.advance()
    pump()
    assert dlv is not None and captured.startswith(b"AMQP"), captured[:16]
    return bytes(captured)


def _guarded(lines: list[str], i: int) -> bool:
    """The traceback at ``lines[i]`` was logged by one of the handler's guards, which close only
    the link or connection the event came from (connectors/amqp/handler.py ``_contained``, the
    attach refusal), not by a failure that ended the reactor."""
    before = lines[i - 1] if i else ""
    return "ERROR connectors.amqp.handler: " in before and before.rstrip().endswith(("closing its connection", "failed"))


def _last_error(lines: list[str], start: int) -> str:
    """The exception line that ends the traceback starting at ``lines[start]``."""
    for line in lines[start + 1 :]:
        if line and not line.startswith((" ", "\t", "Traceback")):
            return line
    return "?"


def _send_raw(port: int, stream: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.settimeout(0.3)
        try:
            sock.sendall(stream)
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline and sock.recv(65536):
                pass
        except OSError:  # the service may close the connection at once, as it should on garbage
            pass


def test_no_client_stops_the_service_and_nothing_accepted_is_lost(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    print(f"wire fuzz seed {SEED}: {REPLAY}")
    service = ServeProcess(tmp_path / "data").start()
    stopped = False
    try:
        url = service.url
        port = urllib.parse.urlsplit(url).port
        assert port
        topic, raw_topic = uid("fz"), uid("rawfz")
        for name in (topic, raw_topic):
            create_topic(str(service.data_dir), name)
        cid = uid("fzc")
        accepted: collections.Counter[bytes] = collections.Counter()
        states: collections.Counter[str] = collections.Counter()
        failures: list[str] = []
        may_expire: set[bytes] = set()
        streams = [_client_stream(raw_topic, _message(rng, -i)) for i in range(1, 4)]
        n = 0
        with Subscriber(url, topic, container_id=cid, credit=500, refill=True, **jms_durable(uid("dur"))) as sub:
            sub.wait_attached()
            deadline = time.monotonic() + WIRE_SECONDS
            while time.monotonic() < deadline:
                batch = []
                for _ in range(rng.randint(1, 12)):
                    n += 1
                    batch.append(_fuzzed_message(rng, n))
                try:
                    outcomes = publish(url, topic, list(batch), timeout=30)
                except AssertionError as exc:
                    failures.append(f"publish of {[b.hex() for b in batch]} failed: {exc}")
                    continue
                assert len(outcomes) == len(batch), (outcomes, REPLAY)
                for raw, outcome in zip(batch, outcomes, strict=True):
                    states[f"{outcome.state} {outcome.condition or ''}".strip()] += 1
                    if outcome.state == "accepted":
                        accepted[raw] += 1
                        row = ingest(raw, topic)
                        if row.columns["ttl"] is not None or row.columns["absolute_expiry_time"] is not None:
                            may_expire.add(raw)  # a mutation may make it expire before delivery
                    elif outcome.state != "rejected":
                        failures.append(f"{raw.hex()}: {outcome}")
                for _ in range(rng.randint(1, 4)):
                    stream = rng.choice(streams)
                    if rng.random() < 0.2:  # whole frames in another order: cut at random points and shuffle
                        cuts = sorted(rng.sample(range(8, len(stream)), 3))
                        pieces = [stream[a:b] for a, b in zip([8, *cuts], [*cuts, len(stream)], strict=True)]
                        rng.shuffle(pieces)
                        stream = stream[:8] + b"".join(pieces)
                    else:
                        stream = stream[:8] + _mutate(rng, stream[8:]) if rng.random() < 0.8 else _mutate(rng, stream)
                    _send_raw(port, stream)
            print(f"sent {n} messages: {dict(states)}")
            assert not failures, f"{REPLAY}\n" + "\n".join(failures[:10])
            assert service.proc is not None and service.proc.poll() is None, f"serve died ({REPLAY}):\n{service.log()[-4000:]}"

            def delivered() -> collections.Counter[bytes]:
                return collections.Counter(bytes(r.raw) for r in list(sub.received))

            must = collections.Counter({raw: k for raw, k in accepted.items() if raw not in may_expire})
            total = sum(must.values())
            try:
                wait_for(lambda: not must - delivered(), 90, f"{total} accepted messages delivered ({REPLAY})")
            except AssertionError as exc:
                got = delivered()
                accepted = must
                raise AssertionError(
                    f"{exc}: {len(sub.received)} arrived, subscriber error {sub.error}, closed {sub.remote_closed}; "
                    f"missing e.g. {[r.hex() for r in (accepted - got)][:3]}\n{service.log()[-6000:]}"
                ) from None
            time.sleep(2)  # anything beyond them would be a duplicate or a rejected message
            got = delivered()
            assert not must - got and not got - accepted, (
                f"{REPLAY}: missing {[r.hex() for r in (accepted - got)][:5]}, "
                f"unexpected or duplicated {[r.hex() for r in (got - accepted)][:5]}"
            )

        # A fresh publisher and subscriber still work.
        with Subscriber(url, topic) as fresh:
            fresh.wait_attached()
            assert [o.state for o in publish(url, topic, [Message(body="after the fuzz")])] == ["accepted"]
            fresh.wait_count(1, timeout=60)
            assert fresh.received[0].message.body == "after the fuzz"
        assert service.proc.poll() is None
        lines = service.log().splitlines()
        contained = sorted(
            {
                lines[i - 1].split(" ERROR ", 1)[-1] + " / " + _last_error(lines, i).split(":", 1)[0]
                for i, line in enumerate(lines)
                if line.startswith("Traceback") and _guarded(lines, i)
            }
        )
        if contained:  # errors a callback's guard kept to their link or connection: defects, but not fatal
            print("contained errors (link or connection refused with amqp:internal-error):\n  " + "\n  ".join(contained))
        fatal = [i for i, line in enumerate(lines)
                 if line.startswith("Traceback") and not _guarded(lines, i)]
        assert not fatal, f"{REPLAY}: the service logged a traceback:\n" + "\n".join(lines[fatal[0] - 2 : fatal[0] + 40])
        code = service.stop()
        stopped = True
        assert code == 0, f"serve exited with {code}:\n{service.log()[-4000:]}"
    finally:
        if not stopped:
            service.kill()
