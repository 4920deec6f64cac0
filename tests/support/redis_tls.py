"""A real ``redis-server`` and ``redis-sentinel`` that speak only TLS, with a private CA.

The CA, the servers' certificate (for 127.0.0.1) and a client certificate are made here with
``cryptography``; the servers run with Redis's defaults for TLS, so they ask every client for a
certificate (``tls-auth-clients yes``) and listen on no plain port. The sentinel talks TLS to the
master too (``tls-replication yes``).
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.processes import stop_process
from tests.support.sentinel_group import free_port, sentinel_binary
from tests.support.waiting import wait_until


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _key_and_name(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Name]:
    return ec.generate_private_key(ec.SECP256R1()), x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )


def _write(
    directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def _valid_for_a_day(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, now: datetime.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def make_certificates(directory: Path, ca_name: str = "chatops test CA") -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_subject = _key_and_name(ca_name)
    ca = (
        _valid_for_a_day(ca_subject, ca_subject, ca_key, now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, _ = _write(directory, "ca", ca, ca_key)

    def issued(
        common_name: str, san: x509.GeneralName | None
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key, subject = _key_and_name(common_name)
        builder = _valid_for_a_day(subject, ca_subject, key, now)
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName([san]), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    server_cert, server_key = _write(
        directory, "server", *issued("redis", x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    )
    client_cert, client_key = _write(directory, "client", *issued("chatops", None))
    return Certificates(ca_path, server_cert, server_key, client_cert, client_key)


def _tls_lines(certs: Certificates, port: int) -> list[str]:
    return [
        "port 0",
        f"tls-port {port}",
        f"tls-cert-file {certs.server_cert}",
        f"tls-key-file {certs.server_key}",
        f"tls-ca-cert-file {certs.ca}",
    ]


def tls_client(certs: Certificates, port: int) -> redis.Redis:
    return redis.Redis(
        host="127.0.0.1",  # the address the server's certificate names
        port=port,
        ssl=True,
        ssl_ca_certs=str(certs.ca),
        ssl_certfile=str(certs.client_cert),
        ssl_keyfile=str(certs.client_key),
        socket_timeout=2,
    )


@dataclass(frozen=True)
class TlsRedis:
    certs: Certificates
    server_port: int
    sentinel_port: int


@contextmanager
def tls_redis(directory: Path) -> Iterator[TlsRedis]:
    """A TLS-only master and a TLS-only sentinel monitoring it as ``mymaster``."""
    if sentinel_binary() is None:
        pytest.skip("redis-sentinel is not installed (`make sentinel` installs Debian's)")
    certs = make_certificates(directory)
    server_port, sentinel_port = free_port(), free_port()
    server_conf = directory / "redis.conf"
    server_conf.write_text("\n".join([*_tls_lines(certs, server_port), 'save ""', f"dir {directory}"]) + "\n")
    sentinel_conf = directory / "sentinel.conf"
    sentinel_conf.write_text(
        "\n".join(
            [
                *_tls_lines(certs, sentinel_port),
                "tls-replication yes",
                f"dir {directory}",
                f"sentinel monitor mymaster 127.0.0.1 {server_port} 1",
            ]
        )
        + "\n"
    )
    log = (directory / "servers.log").open("w")
    processes = [
        subprocess.Popen(["redis-server", str(server_conf)], stdout=log, stderr=subprocess.STDOUT),
        subprocess.Popen([str(sentinel_binary()), str(sentinel_conf)], stdout=log, stderr=subprocess.STDOUT),
    ]
    try:

        def answers(port: int) -> bool:
            try:
                return bool(tls_client(certs, port).ping())
            except (redis.RedisError, OSError):
                return False

        wait_until(
            lambda: answers(server_port) and answers(sentinel_port), timeout=15, what="TLS Redis and sentinel"
        )
        yield TlsRedis(certs, server_port, sentinel_port)
    finally:
        for process in processes:
            stop_process(process, 5.0)
        log.close()
