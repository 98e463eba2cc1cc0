"""SCRAM (sharedsub/core/security/scram.py): the RFC 5802 and RFC 7677 test vectors, stored credentials, PLAIN."""

from __future__ import annotations

import base64

import pytest

from sharedsub.core.security import scram

# (mechanism, client nonce, server nonce, salt, server-first, client-final, server-final):
# RFC 5802 section 5 (SHA-1) and RFC 7677 section 3 (SHA-256), user "user", password "pencil".
VECTORS = [
    (
        "SCRAM-SHA-1",
        "fyko+d2lbbFgONRv9qkxdawL",
        "3rfcNHYJY1ZVvWVs7j",
        "QSXCR+Q6sek8bf92",
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    ),
    (
        "SCRAM-SHA-256",
        "rOprNGfwEbeRWgbNEkqO",
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ),
]


@pytest.mark.parametrize(("mech", "cnonce", "snonce", "salt", "server_first", "client_final", "server_final"), VECTORS)
def test_rfc_vectors(mech: str, cnonce: str, snonce: str, salt: str, server_first: str, client_final: str,
                     server_final: str) -> None:
    cred = scram.derive("pencil", mech, 4096, base64.b64decode(salt))
    server = scram.ScramServer(mech, {"user": cred}.get, nonce=snonce)
    assert server.first(f"n,,n=user,r={cnonce}".encode()).decode() == server_first
    client = scram.ScramClient(mech, "user", "pencil", nonce=cnonce)
    assert client.final(server_first.encode()).decode() == client_final
    assert server.final(client_final.encode()).decode() == server_final
    assert server.user == "user" and client.verify(server_final.encode())


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_credential_text_round_trip(mech: str) -> None:
    cred = scram.derive("s3cret", mech)
    text = cred.to_text()
    assert text.startswith(f"{mech}$4096:") and "s3cret" not in text
    assert scram.Credential.from_text(text) == cred


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("nonsense", "not a SCRAM credential"),
        ("SCRAM-MD5$4096:AAAA$AAAA:AAAA", "unknown mechanism"),
        ("SCRAM-SHA-256$10:" + "A" * 24 + "$" + "A" * 44 + ":" + "A" * 44, "iterations"),
        ("SCRAM-SHA-256$4096:" + "A" * 24 + "$AAAA:AAAA", "keys must be 32 bytes"),
        ("SCRAM-SHA-256$4096:%%%%$AAAA:AAAA", "not a SCRAM credential"),
    ],
)
def test_bad_credential_text(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        scram.Credential.from_text(text)


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize(("offered", "ok"), [("s3cret", True), ("S3cret", False), ("", False)])
def test_plain_is_checked_against_the_stored_keys(mech: str, offered: str, ok: bool) -> None:
    assert scram.check_password(scram.derive("s3cret", mech), offered) is ok


def _exchange(mech: str, cred: scram.Credential | None, password: str, *, first: bytes | None = None) -> bytes:
    client = scram.ScramClient(mech, "user", password)
    server = scram.ScramServer(mech, lambda name: cred if name == "user" else None)
    server_first = server.first(first or client.first())
    return server.final(client.final(server_first))


@pytest.mark.parametrize(
    ("case", "mech", "stored_for", "password", "error"),
    [
        ("wrong password", "SCRAM-SHA-256", "SCRAM-SHA-256", "nope", "wrong password"),
        ("unknown user", "SCRAM-SHA-512", None, "pw", "unknown user"),
        ("credential of the other hash", "SCRAM-SHA-512", "SCRAM-SHA-256", "pw", "unknown user"),
    ],
)
def test_failed_exchanges(case: str, mech: str, stored_for: str | None, password: str, error: str) -> None:
    cred = scram.derive("pw", stored_for) if stored_for else None
    with pytest.raises(scram.AuthFailed, match=error):
        _exchange(mech, cred, password)


@pytest.mark.parametrize(
    ("client_first", "error"),
    [
        (b"p=tls-unique,,n=user,r=abc", "channel binding"),
        (b"x,,n=user,r=abc", "channel-binding flag"),
        (b"n,,r=abc,n=user", "must start with n=,r="),
        (b"n,,n=us=2Xer,r=abc", "bad escape"),
        (b"n,,n=user,r=", "empty client nonce"),
        (b"n,,", "bad attribute"),
        (b"\xff", "not UTF-8"),
    ],
)
def test_malformed_client_first(client_first: bytes, error: str) -> None:
    server = scram.ScramServer("SCRAM-SHA-256", lambda _name: None)
    with pytest.raises(scram.AuthFailed, match=error):
        server.first(client_first)


def test_unknown_user_gets_a_stable_challenge_like_a_known_one() -> None:
    key = b"k" * 32
    a = scram.ScramServer("SCRAM-SHA-256", lambda _n: None, nonce="S", fake_key=key).first(b"n,,n=ghost,r=C")
    b = scram.ScramServer("SCRAM-SHA-256", lambda _n: None, nonce="S", fake_key=key).first(b"n,,n=ghost,r=C")
    assert a == b and a.startswith(b"r=CS,s=") and a.endswith(b",i=4096")


def test_escaped_user_name_and_authzid() -> None:
    server = scram.ScramServer("SCRAM-SHA-256", lambda _n: None)
    server.first(b"n,a=b=2Cc,n=a=3Db,r=x")
    assert (server.user, server.authzid) == ("a=b", "b,c")


def test_tampered_nonce_or_gs2_fails() -> None:
    cred = scram.derive("pw", "SCRAM-SHA-256")
    client = scram.ScramClient("SCRAM-SHA-256", "user", "pw")
    server = scram.ScramServer("SCRAM-SHA-256", lambda _n: cred)
    final = client.final(server.first(client.first())).decode()
    with pytest.raises(scram.AuthFailed, match="nonce"):
        server.final(final.replace(",r=", ",r=X").encode())
    with pytest.raises(scram.AuthFailed, match="channel-binding data"):
        server.final(final.replace("c=biws", "c=eSws").encode())
