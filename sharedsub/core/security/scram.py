"""SCRAM (RFC 5802, with the SHA-256 profile of RFC 7677 and SHA-512 alike): stored credentials,
the server side of one exchange, and PLAIN checked against the same stored keys.

Pure: bytes in, bytes out. No plaintext password is ever kept. A user's credential for one hash
is (salt, iterations, StoredKey, ServerKey)::

    SaltedPassword = PBKDF2-HMAC-H(password, salt, iterations)
    ClientKey      = HMAC(SaltedPassword, "Client Key");  StoredKey = H(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Passwords are used as their UTF-8 bytes without SASLprep (RFC 4013) normalisation: ASCII
passwords behave as the RFCs say; others work only with clients that send the same bytes.
Channel binding (``p=`` in the gs2 header) is refused: we never offer a ``-PLUS`` mechanism.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable

HASHES = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""SCRAM mechanism name -> hashlib name. SHA-1 only for the RFC 5802 test vectors: the users
file stores SHA-256 and SHA-512 credentials."""
STORED = ("SCRAM-SHA-256", "SCRAM-SHA-512")
"""The mechanisms a user's credentials are stored for (``sharedsub users add``)."""
DEFAULT_ITERATIONS = 4096
"""PBKDF2 iterations of new credentials (RFC 7677's minimum). PLAIN pays one PBKDF2 per
connection on the reactor thread (about 1 ms for SHA-256 at 4096 iterations)."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 10_000_000


class AuthFailed(Exception):
    """The exchange ended without authenticating (sasl-outcome ``auth``); the message is for the
    log only, never sent."""


class BadMessage(AuthFailed):
    """A malformed SCRAM message (also answered with ``auth``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Credential:
    """What is stored for one user and one hash."""

    mechanism: str  # "SCRAM-SHA-256" | "SCRAM-SHA-512" (| "SCRAM-SHA-1" in tests)
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @property
    def hash(self) -> str:
        """The hashlib name of the mechanism's hash."""
        return HASHES[self.mechanism]

    def to_text(self) -> str:
        """``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` (base64; PostgreSQL's format)."""

        def b64(raw: bytes) -> str:
            return base64.b64encode(raw).decode("ascii")

        return f"{self.mechanism}${self.iterations}:{b64(self.salt)}${b64(self.stored_key)}:{b64(self.server_key)}"

    @classmethod
    def from_text(cls, text: str) -> Credential:
        """Parse :meth:`to_text`'s form.

        Raises:
            ValueError: not that form, an unknown mechanism, iterations out of range, or key
                lengths that do not fit the hash.
        """
        try:
            mechanism, params, keys = text.split("$")
            iterations, salt = params.split(":")
            stored, server = keys.split(":")
            cred = cls(
                mechanism,
                base64.b64decode(salt, validate=True),
                int(iterations),
                base64.b64decode(stored, validate=True),
                base64.b64decode(server, validate=True),
            )
        except (ValueError, TypeError):
            raise ValueError(f"not a SCRAM credential ({'$'.join(text.split('$')[:1])}$...)") from None
        if mechanism not in HASHES:
            raise ValueError(f"unknown mechanism {mechanism!r}")
        if not MIN_ITERATIONS <= cred.iterations <= MAX_ITERATIONS and mechanism != "SCRAM-SHA-1":
            raise ValueError(f"iterations {cred.iterations} outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        size = hashlib.new(cred.hash).digest_size
        if len(cred.stored_key) != size or len(cred.server_key) != size or not cred.salt:
            raise ValueError(f"{mechanism} keys must be {size} bytes and the salt not empty")
        return cred


def _hmac(hash_name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hash_name).digest()


def _salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def derive(password: str, mechanism: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None) -> Credential:
    """The credential of ``password`` for ``mechanism`` (a fresh 16-byte random salt unless given)."""
    hash_name = HASHES[mechanism]
    salt = os.urandom(16) if salt is None else salt
    sp = _salted_password(hash_name, password, salt, iterations)
    client_key = _hmac(hash_name, sp, b"Client Key")
    return Credential(
        mechanism, salt, iterations, hashlib.new(hash_name, client_key).digest(), _hmac(hash_name, sp, b"Server Key")
    )


def check_password(cred: Credential, password: str) -> bool:
    """PLAIN: True when ``password`` gives ``cred``'s StoredKey (constant-time compare)."""
    sp = _salted_password(cred.hash, password, cred.salt, cred.iterations)
    stored = hashlib.new(cred.hash, _hmac(cred.hash, sp, b"Client Key")).digest()
    return hmac.compare_digest(stored, cred.stored_key)


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        if len(part) < 2 or part[1] != "=":
            raise BadMessage(f"bad attribute {part[:16]!r}")
        out.append((part[0], part[2:]))
    return out


def _unescape_name(name: str) -> str:
    """A saslname (RFC 5802 5.1): ``=2C`` is ``,``, ``=3D`` is ``=``, any other ``=`` is invalid."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            esc = name[i : i + 3]
            if esc not in ("=2C", "=3D"):
                raise BadMessage("bad escape in user name")
            out.append("," if esc == "=2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


class ScramServer:
    """The server side of one SCRAM exchange.

    ``lookup(user)`` gives the user's credential for this mechanism, or None. ``first(client_first)``
    returns server-first; ``final(client_final)`` returns server-final (``v=...``, sent as the
    sasl-outcome's additional-data), and sets :attr:`user`. Both raise :class:`AuthFailed`
    (or :class:`BadMessage`) when the exchange fails.

    An unknown user gets a challenge like a known one's: a salt derived from the name with
    ``fake_key`` (per process) and the default iterations; it then fails at ``final``.
    """

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], Credential | None],
        *,
        nonce: str | None = None,
        fake_key: bytes = b"",
    ) -> None:
        self.mechanism = mechanism
        self.hash = HASHES[mechanism]
        self._lookup = lookup
        self._nonce = nonce or secrets.token_urlsafe(18)
        self._fake_key = fake_key or os.urandom(32)
        self.user: str | None = None
        self.authzid: str | None = None
        self._cred: Credential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._full_nonce = ""

    def first(self, client_first: bytes) -> bytes:
        """server-first for ``client_first``."""
        try:
            msg = client_first.decode("utf-8")
        except UnicodeDecodeError:
            raise BadMessage("client-first is not UTF-8") from None
        parts = msg.split(",", 2)
        if len(parts) != 3:
            raise BadMessage("client-first has no gs2 header")
        cbind, authz, bare = parts
        if cbind == "p" or cbind.startswith("p="):
            raise AuthFailed("channel binding is not supported")
        if cbind not in ("n", "y"):
            raise BadMessage("bad gs2 channel-binding flag")
        if authz:
            if not authz.startswith("a="):
                raise BadMessage("bad gs2 authzid")
            self.authzid = _unescape_name(authz[2:])
        self._gs2 = f"{cbind},{authz},"
        attrs = _attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise BadMessage("client-first-bare must start with n=,r=")
        user = _unescape_name(attrs[0][1])
        cnonce = attrs[1][1]
        if not cnonce:
            raise BadMessage("empty client nonce")
        self._client_first_bare = bare
        cred = self._lookup(user)
        self._cred = cred if cred is not None and cred.mechanism == self.mechanism else None
        self.user = user
        if self._cred is not None:
            salt, iterations = self._cred.salt, self._cred.iterations
        else:
            salt, iterations = _hmac("sha256", self._fake_key, user.encode("utf-8"))[:16], DEFAULT_ITERATIONS
        self._full_nonce = cnonce + self._nonce
        self._server_first = f"r={self._full_nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """server-final for ``client_final`` when its proof is right."""
        if not self._server_first:
            raise BadMessage("client-final before client-first")
        try:
            msg = client_final.decode("utf-8")
        except UnicodeDecodeError:
            raise BadMessage("client-final is not UTF-8") from None
        attrs = _attrs(msg)
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise BadMessage("client-final must be c=,r=,...,p=")
        without_proof = msg[: msg.rindex(",p=")]
        try:
            cbind = base64.b64decode(attrs[0][1], validate=True)
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except ValueError:
            raise BadMessage("bad base64") from None
        if cbind != self._gs2.encode():
            raise AuthFailed("channel-binding data does not match the gs2 header")
        if attrs[1][1] != self._full_nonce:
            raise AuthFailed("nonce mismatch")
        if self._cred is None:
            raise AuthFailed(f"unknown user {self.user!r}")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self.hash, self._cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise AuthFailed("proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), self._cred.stored_key):
            raise AuthFailed(f"wrong password for {self.user!r}")
        return b"v=" + base64.b64encode(_hmac(self.hash, self._cred.server_key, auth_message))


class ScramClient:
    """The client side, for tests."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        self.hash = HASHES[mechanism]
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(18)
        self._bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        """client-first (no channel binding, no authzid)."""
        return ("n,," + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        """client-final answering ``server_first``."""
        sf = server_first.decode()
        a = dict(_attrs(sf))
        sp = _salted_password(self.hash, self.password, base64.b64decode(a["s"]), int(a["i"]))
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={a['r']}"
        auth = f"{self._bare},{sf},{without_proof}".encode()
        ck = _hmac(self.hash, sp, b"Client Key")
        sig = _hmac(self.hash, hashlib.new(self.hash, ck).digest(), auth)
        self._server_signature = _hmac(self.hash, _hmac(self.hash, sp, b"Server Key"), auth)
        proof = base64.b64encode(bytes(x ^ y for x, y in zip(ck, sig, strict=True))).decode()
        return f"{without_proof},p={proof}".encode()

    def verify(self, server_final: bytes) -> bool:
        """True when ``server_final`` proves the server knows the ServerKey."""
        return server_final == b"v=" + base64.b64encode(self._server_signature)
