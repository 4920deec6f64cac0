"""The bot's own endpoints (its Redis, its web and metrics port): reached only through an entry naming the port."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from tools.egress_addresses import IPAddress, normalize_host, parse_address, special_range
from tools.resolver import Resolver, interface_addresses


@dataclass(frozen=True)
class ProtectedEndpoint:
    """A port of the bot itself (its Redis, its web process); refused unless an entry names the port."""

    label: str
    port: int
    names: frozenset[str] = frozenset()
    addresses: frozenset[IPAddress] = frozenset()
    local: bool = False
    """Listening on this host: loopback, unspecified and every interface address count too."""

    def matches(self, host: str, address: IPAddress, port: int) -> bool:
        if port != self.port:
            return False
        if host in self.names or address in self.addresses:
            return True
        return self.local and special_range(address) in ("loopback", "unspecified")


ALL_INTERFACES = "0.0.0.0"  # a web port bound to every address of the host (WEB_HOST's default)


def protected_endpoints(
    *,
    redis_url: str | None,
    web_port: int | None,
    web_host: str = ALL_INTERFACES,
    resolver: Resolver,
    local_addresses: Callable[[], Iterable[str]] = interface_addresses,
) -> list[ProtectedEndpoint]:
    """The bot's Redis (from ``REDIS_URL``) and its web/metrics port (``PORT`` on ``WEB_HOST``)."""
    local = frozenset(a for a in (parse_address(text) for text in local_addresses()) if a is not None)
    endpoints = []
    if redis_url:
        parts = urlsplit(redis_url)
        if parts.scheme in ("redis", "rediss") and parts.port != 0:
            host = normalize_host(parts.hostname or "localhost")
            endpoints.append(_endpoint("the bot's own Redis", host, parts.port or 6379, resolver, local))
    if web_port:
        endpoints.append(_endpoint("the bot's own web and metrics port", web_host, web_port, resolver, local))
    return endpoints


def _endpoint(
    label: str, host: str, port: int, resolver: Resolver, local: frozenset[IPAddress]
) -> ProtectedEndpoint:
    addresses = _addresses_of(host, resolver)
    on_this_host = host == "localhost" or any(
        special_range(address) in ("loopback", "unspecified") or address in local for address in addresses
    )
    found = frozenset(addresses) | (local if on_this_host else frozenset())
    return ProtectedEndpoint(label, port, frozenset({host}), found, local=on_this_host)


def _addresses_of(host: str, resolver: Resolver) -> list[IPAddress]:
    literal = parse_address(host)
    if literal is not None:
        return [literal]
    try:
        answers = resolver.resolve(host, timeout=2.0).addresses
    except (OSError, TimeoutError):
        return []  # still protected by name
    return [address for address in (parse_address(text) for text in answers) if address is not None]
