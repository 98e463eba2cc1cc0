"""The server side of the AMQP SASL layer (spec 5.3) as a pure state machine: bytes in, bytes out.

    exchange = SaslExchange(policy, encrypted=True, peer_subject="CN=alice,O=Example")
    exchange.feed(bytes_from_peer)          # any split, any number of calls
    send(exchange.take_output())            # SASL header, mechanisms, challenge, outcome
    if exchange.done: exchange.ok, .user, .mechanism, .leftover (AMQP bytes the client pipelined)

The I/O layer (connectors/amqp/secure_listener.py) drives it; it never touches a socket.

What the server offers (:meth:`SaslExchange.offered`), in this order (Qpid JMS picks the first
it can use that it ranks highest; proton and rhea take the one they were told to use):

====  ==============================================================  =======================
 #    when                                                            mechanism
====  ==============================================================  =======================
 1    ``policy.external`` and TLS gave a verified client certificate  EXTERNAL
 2    listed in ``policy.mechanisms``                                 SCRAM-SHA-512,
                                                                      SCRAM-SHA-256, PLAIN
 3    ``policy.anonymous``                                            ANONYMOUS
====  ==============================================================  =======================

How each exchange ends:

====  ==============================================================  =======================
 #    client sends                                                    result
====  ==============================================================  =======================
 1    ``AMQP 3.1.0.0`` then sasl-init of an offered mechanism with    outcome ok; ``user``;
      the right credentials                                           SCRAM: additional-data
                                                                      = server-final
 2    sasl-init of a mechanism not offered, wrong password, unknown   outcome ``auth`` (1)
      user, an authzid other than the user, malformed PLAIN/SCRAM
 3    ``AMQP 0.1.0.0`` (no SASL) and ``policy.anonymous``             ok, user None; the
                                                                      header is leftover
 4    ``AMQP 0.1.0.0`` without ``policy.anonymous``, any other AMQP   our SASL header, then
      header                                                          closed (spec 2.2)
 5    bytes that are not AMQP, a frame that is not SASL or too big,   closed without outcome
      a frame out of order (not sasl-init, then sasl-response)
====  ==============================================================  =======================

Whatever follows the deciding frame (a client may pipeline its AMQP header and open) is
``leftover`` for the AMQP transport. ``reason`` says why it failed, for the log only.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Callable, Mapping

from sharedsub.core.security import sasl_frames as sf
from sharedsub.core.security import scram

PASSWORD_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
"""Mechanisms checked against the users file, in the order they are offered."""

Users = Callable[[str], Mapping[str, scram.Credential]]
"""A user's credentials by SCRAM mechanism name (empty when there is no such user)."""


def anonymous_allowed(mode: str, have_users: bool) -> bool:
    """Whether anonymous clients are let in, by ``[security] anonymous`` (auto, true, false) and
    whether the users file holds any user at start: "auto" allows them only without users."""
    return mode == "true" or (mode == "auto" and not have_users)


def _no_users(_name: str) -> Mapping[str, scram.Credential]:
    return {}


def _no_external_user(_subject: str) -> str | None:
    return None


@dataclasses.dataclass(frozen=True)
class SaslPolicy:
    """What a listener offers and how it checks it."""

    users: Users = _no_users
    mechanisms: tuple[str, ...] = PASSWORD_MECHANISMS  # any of PASSWORD_MECHANISMS
    anonymous: bool = False  # offer ANONYMOUS and accept a bare AMQP header
    external: bool = False  # offer EXTERNAL when TLS gave a verified client certificate
    external_user: Callable[[str], str | None] = _no_external_user  # subject DN -> user
    max_frame: int = sf.DEFAULT_MAX_FRAME
    fake_key: bytes = dataclasses.field(default_factory=lambda: os.urandom(32))  # SCRAM salts of unknown users


class _State(enum.Enum):
    HEADER = 1
    INIT = 2
    RESPONSE = 3
    DONE = 4


class SaslExchange:
    """One connection's SASL exchange (server side)."""

    def __init__(self, policy: SaslPolicy, *, encrypted: bool = False, peer_subject: str | None = None) -> None:
        self.policy = policy
        self.encrypted = encrypted
        self.peer_subject = peer_subject
        self.ok = False
        self.user: str | None = None  # None for anonymous
        self.mechanism: str | None = None  # None: no SASL layer (bare AMQP header)
        self.reason = ""
        self.leftover = b""
        self._state = _State.HEADER
        self._in = bytearray()
        self._out = bytearray()
        self._step: Callable[[bytes], None] | None = None
        self._scram: scram.ScramServer | None = None

    @property
    def done(self) -> bool:
        """True once the exchange succeeded (``ok``) or failed."""
        return self._state is _State.DONE

    def offered(self) -> list[str]:
        """The mechanisms this connection is offered (table in the module docstring)."""
        p = self.policy
        mechs: list[str] = []
        if p.external and self.peer_subject is not None:
            mechs.append("EXTERNAL")
        mechs += [m for m in PASSWORD_MECHANISMS if m in p.mechanisms]
        if p.anonymous:
            mechs.append("ANONYMOUS")
        return mechs

    def take_output(self) -> bytes:
        """Bytes for the peer produced since the last call."""
        out = bytes(self._out)
        self._out.clear()
        return out

    def feed(self, data: bytes) -> None:
        """Bytes from the peer. After a success they are added to ``leftover``; after a failure
        they are dropped."""
        if self._state is _State.DONE:
            if self.ok:
                self.leftover += data
            return
        self._in += data
        try:
            self._process()
        except sf.FrameError as exc:
            self._fail(f"framing error: {exc}", send_outcome=False)

    def eof(self) -> None:
        """The peer closed before the exchange ended."""
        if self._state is not _State.DONE:
            self._fail("peer closed during SASL", send_outcome=False)

    # ------------------------------------------------------------------ states

    def _process(self) -> None:
        if self._state is _State.HEADER and not self._header():
            return
        while self._state in (_State.INIT, _State.RESPONSE):
            frame, used = sf.decode(self._in, self.policy.max_frame)
            if frame is None:
                return
            del self._in[:used]
            if frame.code == 0:
                continue  # an empty frame
            if self._state is _State.INIT:
                if frame.code != sf.INIT:
                    self._fail(f"expected sasl-init, got 0x{frame.code:x}", send_outcome=False)
                    return
                mech = frame.field(0)
                self._on_init(mech if isinstance(mech, str) else "", frame.field(1))
            else:
                if frame.code != sf.RESPONSE:
                    self._fail(f"expected sasl-response, got 0x{frame.code:x}", send_outcome=False)
                    return
                assert self._step is not None
                data = frame.field(0)
                self._step(data if isinstance(data, bytes) else b"")

    def _header(self) -> bool:
        """Handle the protocol header; True when SASL frames follow."""
        if len(self._in) < 8:
            if not sf.SASL_HEADER.startswith(bytes(self._in[:4])):
                self._fail("not AMQP", send_outcome=False)
            return False
        header = bytes(self._in[:8])
        del self._in[:8]
        if header == sf.SASL_HEADER:
            self._out += sf.SASL_HEADER + sf.mechanisms(self.offered())
            self._state = _State.INIT
            return True
        if header == sf.AMQP_HEADER and self.policy.anonymous:
            self._succeed(None, None, leftover=header + bytes(self._in))
            return False
        if header.startswith(b"AMQP"):
            self._out += sf.SASL_HEADER  # spec 2.2: answer with the header we support, then close
            self._fail(f"protocol header {header!r} refused: SASL is required", send_outcome=False)
        else:
            self._fail("not AMQP", send_outcome=False)
        return False

    def _on_init(self, mech: str, initial: bytes | None) -> None:
        self.mechanism = mech
        if mech not in self.offered():
            self._fail(f"mechanism {mech!r} not offered")
        elif mech == "ANONYMOUS":
            self._succeed(None, None)
        elif mech == "EXTERNAL":
            self._external(initial or b"")
        elif mech == "PLAIN":
            self._run(self._plain, initial)
        else:
            self._scram = scram.ScramServer(mech, self._lookup, fake_key=self.policy.fake_key)
            self._run(self._scram_first, initial)

    def _run(self, step: Callable[[bytes], None], initial: bytes | None) -> None:
        # A mechanism that needs client data but got no initial-response gets an empty challenge.
        if initial is None:
            self._challenge(b"", step)
        else:
            step(initial)

    def _challenge(self, data: bytes, step: Callable[[bytes], None]) -> None:
        self._out += sf.challenge(data)
        self._step = step
        self._state = _State.RESPONSE

    def _lookup(self, user: str) -> scram.Credential | None:
        assert self._scram is not None
        return self.policy.users(user).get(self._scram.mechanism)

    def _plain(self, data: bytes) -> None:
        parts = data.split(b"\0")
        if len(parts) != 3:
            self._fail("malformed PLAIN response")
            return
        try:
            authzid, authcid, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            self._fail("PLAIN response is not UTF-8")
            return
        creds = self.policy.users(authcid)
        cred = next((creds[m] for m in scram.STORED if m in creds), None)
        if cred is None:
            scram.derive(password, "SCRAM-SHA-256")  # the cost of a real check: timing tells no users apart
            self._fail(f"unknown user {authcid!r}")
        elif not scram.check_password(cred, password):
            self._fail(f"wrong password for {authcid!r}")
        elif authzid and authzid != authcid:
            self._fail(f"{authcid!r} may not act as {authzid!r}")
        else:
            self._succeed(authcid, None)

    def _scram_first(self, data: bytes) -> None:
        assert self._scram is not None
        try:
            self._challenge(self._scram.first(data), self._scram_final)
        except scram.AuthFailed as exc:
            self._fail(f"{self.mechanism}: {exc}")

    def _scram_final(self, data: bytes) -> None:
        assert self._scram is not None
        try:
            server_final = self._scram.final(data)
        except scram.AuthFailed as exc:
            self._fail(f"{self.mechanism}: {exc}")
            return
        if self._scram.authzid and self._scram.authzid != self._scram.user:
            self._fail(f"{self._scram.user!r} may not act as {self._scram.authzid!r}")
            return
        self._succeed(self._scram.user, server_final)

    def _external(self, authzid: bytes) -> None:
        user = self.policy.external_user(self.peer_subject) if self.peer_subject is not None else None
        if user is None:
            self._fail(f"no user for the certificate subject {self.peer_subject!r}")
        elif authzid and authzid.decode("utf-8", "replace") != user:
            self._fail(f"certificate user {user!r} may not act as {authzid!r}")
        else:
            self._succeed(user, None)

    def _succeed(self, user: str | None, additional: bytes | None, leftover: bytes | None = None) -> None:
        if leftover is None:
            self._out += sf.outcome(sf.OK, additional)
            leftover = bytes(self._in)
        self._in.clear()
        self.user, self.ok, self.leftover = user, True, leftover
        self._state = _State.DONE

    def _fail(self, reason: str, *, send_outcome: bool = True) -> None:
        if send_outcome:
            self._out += sf.outcome(sf.AUTH)
        self._in.clear()
        self.reason = reason
        self._state = _State.DONE
