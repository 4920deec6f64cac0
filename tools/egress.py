"""The egress policy: which hosts and addresses the network tools may reach (``CHATOPS_EGRESS_ALLOW``).

A log line can ask the model for a "health check" of a host it names; the model obeys. So network
tools reach only what the operator listed, checked in code at connect time:

* a **host name** must match an entry by name (exact, or ``*.domain``) *before it is resolved*:
  looking up a name built from log text already hands that text to the name's DNS server;
* an **IP address** must fall in an address or CIDR entry;
* every address a name resolves to then passes the **deny rules**, and the connection goes to
  exactly those vetted addresses (``vet`` returns them; nothing resolves the name a second time,
  so a DNS answer that changes between check and connect changes nothing);
* **special ranges** (loopback, link-local with the cloud metadata address, unspecified,
  multicast, reserved) are reached only through an *exact* entry: a host name or an address
  written out, or a CIDR that lies inside the special range (``127.0.0.0/8``). ``*.domain`` and
  broad CIDRs such as ``0.0.0.0/0`` never open them;
* the bot's **own endpoints** (its Redis, its web and metrics port) are reached only through an
  entry naming that port (``127.0.0.1:6379``): allowing loopback is not allowing Redis.

Entry syntax, comma- or space-separated: ``grafana.corp``, ``*.corp.example`` (any name below
it, not the name itself), ``10.0.0.5``, ``10.0.0.0/8``, ``fd00::/8``, each optionally with
``:PORT`` (IPv6 in brackets: ``[fd00::1]:443``, ``[fd00::/8]:443``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote, urlsplit

from tools.errors import EgressRefusedError, ToolConfigError
from tools.resolver import Resolver, SystemResolver, interface_addresses

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_SPECIAL_RANGES: tuple[tuple[str, IPNetwork], ...] = tuple(
    (label, ipaddress.ip_network(cidr))
    for label, cidr in (
        ("loopback", "127.0.0.0/8"),
        ("loopback", "::1/128"),
        ("link-local (cloud metadata lives there)", "169.254.0.0/16"),
        ("link-local", "fe80::/10"),
        ("unspecified", "0.0.0.0/8"),
        ("unspecified", "::/128"),
        ("multicast", "224.0.0.0/4"),
        ("multicast", "ff00::/8"),
        ("reserved", "240.0.0.0/4"),
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_MAX_NAME_CHARS = 253


# -- entries --------------------------------------------------------------------------------------


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (IPv4-mapped and NAT64 IPv6 read as the IPv4 they carry), else None."""
    try:
        address = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def normalize_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def special_range(address: IPAddress) -> str | None:
    """The label of the special range holding ``address`` (``loopback``...), or None."""
    for label, network in _SPECIAL_RANGES:
        if address.version == network.version and address in network:
            return label
    return None


@dataclass(frozen=True)
class AllowEntry:
    """One entry of ``CHATOPS_EGRESS_ALLOW``."""

    text: str
    kind: Literal["name", "suffix", "network"]
    name: str = ""
    """The exact name, or for ``*.corp.example`` the suffix ``.corp.example``."""
    network: IPNetwork | None = None
    port: int | None = None

    @property
    def exact(self) -> bool:
        """Written out: may reach special ranges (loopback, link-local...)."""
        if self.kind == "name":
            return True
        if self.network is None:
            return False
        if self.network.num_addresses == 1:
            return True
        return any(_inside(self.network, special) for _, special in _SPECIAL_RANGES)

    def port_matches(self, port: int | None) -> bool:
        return self.port is None or port is None or self.port == port

    def matches_name(self, host: str, port: int | None) -> bool:
        if not self.port_matches(port):
            return False
        if self.kind == "name":
            return host == self.name
        return self.kind == "suffix" and host.endswith(self.name) and len(host) > len(self.name)

    def matches_address(self, address: IPAddress, port: int | None) -> bool:
        network = self.network
        return (
            network is not None
            and self.port_matches(port)
            and address.version == network.version
            and address in network
        )


def _inside(network: IPNetwork, special: IPNetwork) -> bool:
    if isinstance(network, ipaddress.IPv4Network) and isinstance(special, ipaddress.IPv4Network):
        return network.subnet_of(special)
    if isinstance(network, ipaddress.IPv6Network) and isinstance(special, ipaddress.IPv6Network):
        return network.subnet_of(special)
    return False


def parse_entry(text: str) -> AllowEntry:
    """One allow-list entry; raises ``ToolConfigError`` naming it."""
    raw = text.strip()
    host, port = _split_port(raw)
    host = normalize_host(host)
    try:
        network = ipaddress.ip_network(host, strict=False) if host else None
    except ValueError:
        network = None
    if network is not None:
        return AllowEntry(raw, "network", network=network, port=port)
    if host.startswith("*."):
        suffix = _idna(host[2:], raw)
        return AllowEntry(raw, "suffix", name=f".{suffix}", port=port)
    return AllowEntry(raw, "name", name=_idna(host, raw), port=port)


def _split_port(raw: str) -> tuple[str, int | None]:
    if raw.startswith("["):
        inner, _, rest = raw[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ToolConfigError(f"egress entry {raw!r}: write [IPv6]:PORT")
        return inner, _port(rest[1:], raw) if rest else None
    if raw.count(":") == 1:
        host, _, port = raw.partition(":")
        return host, _port(port, raw)
    return raw, None  # no port, or a bare IPv6 address or network


def _port(text: str, raw: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ToolConfigError(f"egress entry {raw!r}: the port must be a number from 1 to 65535")
    return int(text)


def _idna(name: str, raw: str) -> str:
    try:
        ascii_name = name.encode("idna").decode("ascii") if not name.isascii() else name
    except UnicodeError:
        ascii_name = ""
    labels = ascii_name.split(".")
    if (
        not ascii_name
        or len(ascii_name) > _MAX_NAME_CHARS
        or not all(_LABEL.fullmatch(label) for label in labels)
    ):
        raise ToolConfigError(
            f"egress entry {raw!r} is not a host name, *.domain pattern, address or CIDR "
            "(a bare '*' is not allowed: list the domains)"
        )
    return ascii_name


# -- the bot's own endpoints ----------------------------------------------------------------------


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


def protected_endpoints(
    *,
    redis_url: str | None,
    web_port: int | None,
    web_host: str = "0.0.0.0",
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


# -- the policy -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EgressPolicy:
    """What network tools may reach. The default allows nothing."""

    entries: tuple[AllowEntry, ...] = ()
    protected: tuple[ProtectedEndpoint, ...] = ()
    resolver: Resolver = field(default_factory=SystemResolver)

    @classmethod
    def parse(
        cls,
        allow: Iterable[str],
        *,
        protected: Sequence[ProtectedEndpoint] = (),
        resolver: Resolver | None = None,
    ) -> EgressPolicy:
        """From ``CHATOPS_EGRESS_ALLOW`` entries; raises ``ToolConfigError`` naming a bad one."""
        entries = tuple(parse_entry(text) for text in allow if text.strip())
        return cls(entries, tuple(protected), resolver or SystemResolver())

    def allowing(self, extra: Iterable[str]) -> EgressPolicy:
        """This policy plus ``extra`` entries (a catalog tool's own fixed host)."""
        added = tuple(parse_entry(text) for text in extra)
        return EgressPolicy(self.entries + added, self.protected, self.resolver)

    def check_lookup(self, host: str) -> None:
        """May ``host`` (a name, or an address for a reverse lookup) be looked up at all?"""
        name = normalize_host(host)
        address = parse_address(name)
        if address is None:
            if not any(entry.matches_name(name, None) for entry in self.entries):
                raise EgressRefusedError(_shown(name))
            return
        if not any(entry.matches_address(address, None) for entry in self.entries):
            raise EgressRefusedError(_shown(name))
        label = special_range(address)
        if label and not self._exact_network(address, None):
            raise EgressRefusedError(_shown(name), f"{address} is {label}")

    def vet(self, host: str, port: int, timeout: float) -> list[str]:
        """The addresses a connection to ``host:port`` may use, all checked; raises ``EgressRefusedError``.

        Resolves a name at most once, and only after the name itself was allowed. Resolver
        failures (``socket.gaierror``, ``TimeoutError``) are passed on for the caller to describe.
        """
        name = normalize_host(host)
        literal = parse_address(name)
        if literal is not None:
            if not any(entry.matches_address(literal, port) for entry in self.entries):
                raise EgressRefusedError(_shown(name))
            addresses, by_exact_name = [literal], False
        else:
            matching = [entry for entry in self.entries if entry.matches_name(name, port)]
            if not matching:
                raise EgressRefusedError(_shown(name))
            answers = self.resolver.resolve(name, timeout).addresses
            addresses = [a for a in (parse_address(text) for text in answers) if a is not None]
            if not addresses:
                raise socket.gaierror(socket.EAI_NONAME, "no addresses")
            by_exact_name = any(entry.kind == "name" for entry in matching)
        for address in addresses:
            self._check_address(name, address, port, by_exact_name)
        return [str(address) for address in addresses]

    def _check_address(self, name: str, address: IPAddress, port: int, by_exact_name: bool) -> None:
        resolved = f"it resolves to {address}, which" if parse_address(name) is None else str(address)
        label = special_range(address)
        if label and not by_exact_name and not self._exact_network(address, port):
            raise EgressRefusedError(_shown(name), f"{resolved} is {label}")
        for endpoint in self.protected:
            if endpoint.matches(name, address, port) and not self._names_port(name, address, port):
                raise EgressRefusedError(f"{_shown(name)}:{port}", f"{resolved} is {endpoint.label}")

    def _exact_network(self, address: IPAddress, port: int | None) -> bool:
        return any(entry.exact and entry.matches_address(address, port) for entry in self.entries)

    def _names_port(self, name: str, address: IPAddress, port: int) -> bool:
        return any(
            entry.port == port and (entry.matches_name(name, port) or entry.matches_address(address, port))
            for entry in self.entries
        )


def _shown(name: str) -> str:
    # The model built this text; keep what it reads back (and Slack shows) short.
    return name if len(name) <= 120 else f"{name[:117]}..."


def fixed_url_entry(url_template: str) -> str | None:
    """``host:port`` of a catalog URL template whose host is fixed text (the operator wrote it)."""
    parts = urlsplit(url_template)
    if "{" in parts.netloc or "}" in parts.netloc or parts.scheme not in ("http", "https"):
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    host = normalize_host(unquote(parts.hostname or ""))
    if not host:
        return None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
