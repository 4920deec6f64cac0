"""The one way the bot opens Redis: ``open_redis(settings)``, with one set of timeouts.

Every process (web, worker and its RQ machinery, runner, the CLI commands, metrics, ``doctor``)
reaches Redis through a client made here, so a slow or unreachable Redis fails the same way
everywhere: a connection within ``CONNECT_TIMEOUT_SECONDS``, each reply within
``REPLY_TIMEOUT_SECONDS``. The bound is the web process's: a click or an event is decided in Redis
before Slack's 3 s are up (connect, then one reply, at worst). A client that sends a command which
blocks on the server by design (``WAITAOF`` / ``WAIT`` with its timeout, ``XREAD`` with ``BLOCK``)
says for how long, and waits for replies that much longer. RQ raises the socket timeout of its
worker's connection itself to cover its blocking dequeue.

Where the server is: ``RedisTarget.from_settings``. Without ``REDIS_SENTINELS`` it is
``REDIS_URL``'s host. With them the client is ``Sentinel.master_for(REDIS_SENTINEL_MASTER)``:
each new connection asks the sentinels for the master's address (``SentinelConnectionPool``), a
connection that gets ``READONLY`` (its server was demoted) is dropped and reconnects, so after a
failover the next command (or redis-py's retry of the failing one) reaches the new master.
``REDIS_URL`` then gives only the database number and, unless ``REDIS_USERNAME`` /
``REDIS_PASSWORD`` do, the servers' credentials; ``REDIS_SENTINEL_USERNAME`` /
``REDIS_SENTINEL_PASSWORD`` are the sentinels' own. RQ's scheduler and work horses rebuild their
connections from the pool's class and arguments, which keep pointing at the same sentinels.

TLS: a ``rediss://`` ``REDIS_URL`` makes every data connection TLS, and ``REDIS_SENTINEL_TLS``
the sentinels' too. Certificates are always verified (``ssl_cert_reqs=required``), against
``REDIS_TLS_CA_FILE`` when given; ``REDIS_TLS_CERT_FILE`` / ``REDIS_TLS_KEY_FILE`` are the client
certificate Redis asks for by default (``tls-auth-clients yes``).

redis-py's pools are fork-aware (a child process never reuses its parent's sockets), and a client
opens no connection until its first command: a forking worker makes its job's client in the work
horse (``bot.ops.compose.default_runtime``), after the fork.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import redis
from redis.maint_notifications import MaintNotificationsConfig
from redis.sentinel import Sentinel

from bot.settings import sentinel_address

if TYPE_CHECKING:
    from bot.settings import Settings

# redis-py before 8.2 left ``Sentinel`` untyped, 8.2 types it: called through ``Any`` so that strict
# mypy passes with either (CI installs the newest release).
_SENTINEL: Any = Sentinel

CONNECT_TIMEOUT_SECONDS = 1.0
REPLY_TIMEOUT_SECONDS = 2.0
HEALTH_CHECK_SECONDS = 30  # a connection idle this long is pinged before it is used again
# redis-py 8 opens each connection with HELLO, then CLIENT SETINFO twice (the library's name and
# version, for CLIENT LIST) and the maintenance-notifications opt-in that only Redis Enterprise
# answers: three round trips more per connection. A work horse opens its connections afresh for
# every job (three a run: RQ's, the run's, the lease's keep-alive), so they were a tenth of a run's
# round trips in the burst benchmark. Neither is something chatops uses.
_HANDSHAKE: dict[str, Any] = {
    "driver_info": None,
    "maint_notifications_config": MaintNotificationsConfig(enabled=False),
}


@dataclass(frozen=True, repr=False)
class RedisTarget:
    """Where the bot's Redis is: ``url`` alone, or the master the ``sentinels`` name ``master``."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = "mymaster"
    username: str = ""  # the data servers' (overrides the URL's when set)
    password: str = ""
    sentinel_username: str = ""
    sentinel_password: str = ""
    tls_ca_file: str = ""  # empty: the system's CAs
    tls_cert_file: str = ""  # a client certificate, for servers that ask for one
    tls_key_file: str = ""
    sentinel_tls: bool = False

    def __repr__(self) -> str:  # never the credentials (the URL's included)
        return f"RedisTarget({self.describe()})"

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisTarget:
        return cls(
            url=settings.redis_url,
            sentinels=tuple(sentinel_address(address) for address in settings.redis_sentinels),
            master=settings.redis_sentinel_master,
            username=settings.redis_username,
            password=settings.redis_password,
            sentinel_username=settings.redis_sentinel_username,
            sentinel_password=settings.redis_sentinel_password,
            tls_ca_file=str(settings.redis_tls_ca_file or ""),
            tls_cert_file=str(settings.redis_tls_cert_file or ""),
            tls_key_file=str(settings.redis_tls_key_file or ""),
            sentinel_tls=settings.redis_sentinel_tls,
        )

    @property
    def replicated(self) -> bool:
        """Behind sentinels: a failover can lose what no replica has yet (``bot.runs.replication``)."""
        return bool(self.sentinels)

    def describe(self) -> str:
        """Where, without credentials (for logs and ``doctor``)."""
        if not self.sentinels:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            where = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"
            return where if host else f"{parts.scheme}://{parts.path}"
        sentinels = ", ".join(f"{host}:{port}" for host, port in self.sentinels)
        return f"master {self.master!r} of the sentinels {sentinels}"

    def _credentials(self) -> dict[str, Any]:
        parts = urlsplit(self.url)
        username = self.username or unquote(parts.username or "")
        password = self.password or unquote(parts.password or "")
        return {"username": username or None, "password": password or None}

    @property
    def tls(self) -> bool:
        """The data servers speak TLS (a ``rediss://`` URL)."""
        return urlsplit(self.url).scheme == "rediss"

    def tls_options(self, enabled: bool, *, in_url: bool = False) -> dict[str, Any]:
        """redis-py's TLS arguments of a connection (none unless ``enabled``): certificates always
        verified, against the CA file if given. ``in_url``: a ``rediss://`` URL already says ``ssl``."""
        if not enabled:
            return {}
        options: dict[str, Any] = {"ssl_cert_reqs": "required", **({} if in_url else {"ssl": True})}
        if self.tls_ca_file:
            options["ssl_ca_certs"] = self.tls_ca_file
        if self.tls_cert_file:
            options.update(ssl_certfile=self.tls_cert_file, ssl_keyfile=self.tls_key_file)
        return options

    def sentinel_manager(self) -> Sentinel:
        """A ``Sentinel`` of these sentinels (connections opened on first use)."""
        sentinel_kwargs: dict[str, Any] = {
            "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "socket_timeout": REPLY_TIMEOUT_SECONDS,
            "username": self.sentinel_username or None,
            "password": self.sentinel_password or None,
            **self.tls_options(self.sentinel_tls),
        }
        sentinel: Sentinel = _SENTINEL(list(self.sentinels), sentinel_kwargs=sentinel_kwargs)
        return sentinel


def open_redis(where: Settings | RedisTarget | str, *, blocking_seconds: float = 0.0) -> redis.Redis:
    """A client of the bot's Redis (``where``: the settings, a target, or a plain ``REDIS_URL``-style
    URL); ``blocking_seconds``: how long the longest command it sends may block on the server by design."""
    if blocking_seconds < 0:
        raise ValueError(f"blocking_seconds must not be negative, got {blocking_seconds}")
    target = _target(where)
    timeouts: dict[str, Any] = {
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": REPLY_TIMEOUT_SECONDS + blocking_seconds,
        "health_check_interval": HEALTH_CHECK_SECONDS,
        **_HANDSHAKE,
    }
    if not target.sentinels:
        overrides = {key: value for key, value in target._credentials().items() if value}
        overrides = overrides if target.username or target.password else {}
        tls = target.tls_options(target.tls, in_url=True)
        return redis.Redis.from_url(target.url, **timeouts, **overrides, **tls)
    parts = urlsplit(target.url)
    database = parts.path.lstrip("/") or "0"
    if not database.isdigit():
        raise ValueError(f"REDIS_URL's database must be a number, got {database!r}")
    manager: Any = target.sentinel_manager()  # see _SENTINEL
    client: redis.Redis = manager.master_for(
        target.master,
        db=int(database),
        **target.tls_options(target.tls),
        **target._credentials(),
        **timeouts,
    )
    return client


def _target(where: Settings | RedisTarget | str) -> RedisTarget:
    if isinstance(where, RedisTarget):
        return where
    if isinstance(where, str):
        return RedisTarget(where)
    return RedisTarget.from_settings(where)
