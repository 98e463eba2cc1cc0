"""Throwaway TLS material for tests, made with the ``openssl`` CLI (the ``cryptography`` package
is not among the project's dependencies) and ``keytool`` for Java trust stores.

``make_certs(dir)`` writes a CA, a server certificate for ``localhost`` / ``127.0.0.1`` signed by
it, and a client certificate (subject ``CN=<client_cn>,O=sharedsub-test``); ``java_truststore``
adds a PKCS12 trust store holding the CA. Valid for 2 days; unencrypted keys.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Certs:
    """Paths of the PEM files."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is not on the PATH: the TLS tests need it to make certificates")
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True)


def make_certs(directory: Path, *, client_cn: str = "alice") -> Certs:
    """CA, server and client certificates in ``directory``."""
    d = directory
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/O=sharedsub-test/CN=sharedsub-test-ca", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, subject, ext in (
        ("server", "/O=sharedsub-test/CN=localhost", ["-extfile", "server.ext"]),
        ("client", f"/O=sharedsub-test/CN={client_cn}", []),
    ):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", *ext, cwd=d)
    return Certs(d / "ca.crt", d / "server.crt", d / "server.key", d / "client.crt", d / "client.key")


def java_truststore(certs: Certs, path: Path, password: str = "changeit") -> Path:
    """A PKCS12 trust store at ``path`` holding the CA (``keytool -importcert``)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        raise RuntimeError("keytool (a JDK) is not on the PATH: the Java TLS tests need it")
    path.unlink(missing_ok=True)
    subprocess.run(
        [keytool, "-importcert", "-noprompt", "-alias", "sharedsub-test-ca", "-file", str(certs.ca),
         "-keystore", str(path), "-storetype", "PKCS12", "-storepass", password],
        check=True, capture_output=True,
    )
    return path
