"""Redis over TLS, with and without Sentinel, against a real TLS-only ``redis-server`` and
``redis-sentinel`` (``tests.support.redis_tls``): what every process opens (``open_redis``).

A client that does not verify the server, or brings no certificate where Redis asks for one, or
talks plain text to a TLS sentinel, must fail; never quietly fall back to an unverified channel.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import ValidationError

from bot.ops.doctor_sentinel import check_sentinel
from bot.redis_connection import open_redis
from bot.settings import Settings
from tests.support.redis_tls import TlsRedis, make_certificates, tls_redis


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[TlsRedis]:
    with tls_redis(tmp_path) as running:
        yield running


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def tls_files(servers: TlsRedis) -> dict[str, Path]:
    return {
        "redis_tls_ca_file": servers.certs.ca,
        "redis_tls_cert_file": servers.certs.client_cert,
        "redis_tls_key_file": servers.certs.client_key,
    }


def round_trip(client: redis.Redis) -> bytes | None:
    client.set("chatops:tls-probe", b"over tls", ex=30)
    value = client.get("chatops:tls-probe")
    return value if isinstance(value, bytes) else None


def test_a_rediss_url_verifies_the_server_and_presents_the_client_certificate(servers: TlsRedis) -> None:
    url = f"rediss://127.0.0.1:{servers.server_port}/0"
    assert round_trip(open_redis(settings(redis_url=url, **tls_files(servers)))) == b"over tls"
    # The system's CAs do not know this server's: refused, never accepted unverified.
    no_ca = {**tls_files(servers)}
    del no_ca["redis_tls_ca_file"]
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        open_redis(settings(redis_url=url, **no_ca)).ping()
    # Redis asks for a client certificate (tls-auth-clients yes, its default).
    with pytest.raises(redis.ConnectionError):
        open_redis(settings(redis_url=url, redis_tls_ca_file=servers.certs.ca)).ping()


def test_a_server_signed_by_another_ca_is_refused(servers: TlsRedis, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    stranger = make_certificates(other, "someone else's CA")
    url = f"rediss://127.0.0.1:{servers.server_port}/0"
    files = {**tls_files(servers), "redis_tls_ca_file": stranger.ca}
    with pytest.raises(redis.ConnectionError, match="certificate verify failed"):
        open_redis(settings(redis_url=url, **files)).ping()


def test_tls_sentinels_lead_to_the_tls_master(servers: TlsRedis) -> None:
    values = {
        "redis_url": "rediss://127.0.0.1/0",  # the host comes from the sentinels
        "redis_sentinels": [f"127.0.0.1:{servers.sentinel_port}"],
        "redis_sentinel_tls": True,
        **tls_files(servers),
    }
    client = open_redis(settings(**values))
    assert round_trip(client) == b"over tls"
    assert client.connection_pool.connection_kwargs["ssl_cert_reqs"] == "required"  # kept for RQ's copies
    # Plain text to a TLS sentinel finds no master.
    plain = open_redis(settings(**{**values, "redis_sentinel_tls": False}))
    with pytest.raises((redis.ConnectionError, ssl.SSLError)):
        plain.ping()


def test_doctor_asks_tls_sentinels_as_the_processes_do(servers: TlsRedis) -> None:
    values = {
        "redis_url": "rediss://127.0.0.1/0",
        "redis_sentinels": [f"127.0.0.1:{servers.sentinel_port}"],
        "redis_sentinel_tls": True,
        **tls_files(servers),
    }
    check = check_sentinel(settings(**values))
    assert f"master 'mymaster' at 127.0.0.1:{servers.server_port}" in check.summary, check.summary
    assert "WAIT 1 is not possible" in check.summary  # a lone master: the probe reached it over TLS


def test_tls_settings_that_cannot_work_are_refused_at_start(tmp_path: Path) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"redis_url": "rediss://h/0", "redis_tls_cert_file": pem}, "go together"),
        ({"redis_url": "redis://h/0", "redis_tls_ca_file": pem}, "nothing uses TLS"),
        ({"redis_sentinel_tls": True}, "REDIS_SENTINEL_TLS needs REDIS_SENTINELS"),
    ]
    for values, message in cases:
        with pytest.raises(ValidationError, match=message):
            settings(**values)
