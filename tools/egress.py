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

What is not listed is refused (``CHATOPS_EGRESS_UNLISTED=refuse``), or under ``approve`` becomes
a call a person approves (``needs_approval``, judged before anything is resolved). The approved
execution runs under ``approving(destination)``: this policy plus exactly that host (or address)
and port, which passes the name and address check and nothing else. It is not an entry: it never
opens a special range or the bot's own endpoints (a destination that could only reach those is
refused with no card), and every address its name resolves to still passes the deny rules.

Entry syntax, comma- or space-separated: ``grafana.corp``, ``*.corp.example`` (any name below
it, not the name itself), ``10.0.0.5``, ``10.0.0.0/8``, ``fd00::/8``, each optionally with
``:PORT`` (IPv6 in brackets: ``[fd00::1]:443``, ``[fd00::/8]:443``).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import unquote, urlsplit

from tools.egress_addresses import (
    LOOPBACK,
    SPECIAL_RANGES,
    IPAddress,
    IPNetwork,
    is_host_name,
    normalize_host,
    parse_address,
    special_range,
)
from tools.egress_endpoints import ProtectedEndpoint, protected_endpoints
from tools.errors import EgressRefusedError, ToolConfigError
from tools.resolver import Resolver, SystemResolver

__all__ = [
    "AllowEntry",
    "Destination",
    "EgressPolicy",
    "ProtectedEndpoint",
    "Unlisted",
    "fixed_url_entry",
    "normalize_host",
    "parse_address",
    "parse_entry",
    "protected_endpoints",
    "special_range",
]

# -- entries --------------------------------------------------------------------------------------


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
        return any(_inside(self.network, special) for _, special in SPECIAL_RANGES)

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
    if not is_host_name(ascii_name):
        raise ToolConfigError(
            f"egress entry {raw!r} is not a host name, *.domain pattern, address or CIDR "
            "(a bare '*' is not allowed: list the domains)"
        )
    return ascii_name


# -- the policy -----------------------------------------------------------------------------------

# A last label no top-level domain has: the resolver reads such a "name" as an address.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")

Unlisted = Literal["refuse", "approve"]
"""``CHATOPS_EGRESS_UNLISTED``: what a call to a destination the allow list does not hold becomes."""
DEFAULT_UNLISTED: Unlisted = "refuse"


@dataclass(frozen=True)
class Destination:
    """Where one call connects (``host:port``), or what it looks up (``port`` is ``None``)."""

    host: str
    """Normalized (``normalize_host``): a name, or an address as written."""
    port: int | None = None

    @classmethod
    def of(cls, host: str, port: int | None = None) -> Destination:
        return cls(normalize_host(host), port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def matches(self, name: str, port: int | None) -> bool:
        """Is a connection to (or lookup of) ``name`` on ``port`` this destination, exactly?"""
        if port != self.port:
            return False
        if name == self.host:
            return True
        address = parse_address(name)
        return address is not None and address == parse_address(self.host)


@dataclass(frozen=True)
class EgressPolicy:
    """What network tools may reach. The default allows nothing."""

    entries: tuple[AllowEntry, ...] = ()
    protected: tuple[ProtectedEndpoint, ...] = ()
    resolver: Resolver = field(default_factory=SystemResolver)
    unlisted: Unlisted = DEFAULT_UNLISTED
    approved: Destination | None = None
    """The one destination a person approved for the execution this policy serves (``approving``)."""

    @classmethod
    def parse(
        cls,
        allow: Iterable[str],
        *,
        protected: Sequence[ProtectedEndpoint] = (),
        resolver: Resolver | None = None,
        unlisted: Unlisted = DEFAULT_UNLISTED,
    ) -> EgressPolicy:
        """From ``CHATOPS_EGRESS_ALLOW`` entries; raises ``ToolConfigError`` naming a bad one."""
        entries = tuple(parse_entry(text) for text in allow if text.strip())
        return cls(entries, tuple(protected), resolver or SystemResolver(), unlisted)

    def allowing(self, extra: Iterable[str]) -> EgressPolicy:
        """This policy plus ``extra`` entries (a catalog tool's own fixed host)."""
        added = tuple(parse_entry(text) for text in extra)
        return replace(self, entries=self.entries + added)

    # -- approve mode: judged before anything is resolved ------------------------------------------

    def needs_approval(self, destination: Destination) -> bool:
        """Under ``approve``: is ``destination`` unlisted, and one an approval could open?

        ``False`` for what is listed (the call goes ahead, checked at connect time as always) and
        for what no approval opens: a special-range address, the bot's own endpoints (by name or
        address), ``localhost`` names, text that is no host name. Those are refused at connect
        time with no card. Nothing is resolved here: a name built from log text must not leak.
        """
        if self.unlisted != "approve" or self._listed(destination) or self._granted(destination):
            return False
        host, port = destination.host, destination.port
        address = parse_address(host)
        if address is None:
            if not is_host_name(host) or _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
                return False  # no name a person could read (``2130706433``, ``127.1`` are addresses)
            if port is not None and any(e.port == port and host in e.names for e in self.protected):
                return False
            if host != "localhost" and not host.endswith(".localhost"):
                return True
            address = LOOPBACK  # a name that always means this host (RFC 6761): judged as loopback
        if special_range(address) and not self._exact_network(address, port):
            return False
        return port is None or not any(
            endpoint.matches(host, address, port) and not self._names_port(host, address, port)
            for endpoint in self.protected
        )

    def approving(self, destination: Destination) -> EgressPolicy:
        """This policy for one approved execution: ``destination`` (host and port) opened, nothing else.

        Only what ``needs_approval`` would ask about is opened; anything else leaves the policy as
        it is. The grant passes the name or address check only: the deny rules still judge every
        address (``_check_address``), so a name resolving to loopback or to Redis stays refused.
        """
        return replace(self, approved=destination) if self.needs_approval(destination) else self

    def _listed(self, destination: Destination) -> bool:
        address = parse_address(destination.host)
        if address is None:
            return any(entry.matches_name(destination.host, destination.port) for entry in self.entries)
        return any(entry.matches_address(address, destination.port) for entry in self.entries)

    def _granted(self, destination: Destination) -> bool:
        return self.approved is not None and self.approved.matches(destination.host, destination.port)

    # -- checks at connect time ----------------------------------------------------------------------

    def check_lookup(self, host: str) -> None:
        """May ``host`` (a name, or an address for a reverse lookup) be looked up at all?"""
        name = normalize_host(host)
        address = parse_address(name)
        granted = self._granted(Destination(name))
        if address is None:
            if not granted and not any(entry.matches_name(name, None) for entry in self.entries):
                raise EgressRefusedError(_shown(name))
            return
        if not granted and not any(entry.matches_address(address, None) for entry in self.entries):
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
        granted = self._granted(Destination(name, port))  # passes this check only, not the deny rules
        if literal is not None:
            if not granted and not any(entry.matches_address(literal, port) for entry in self.entries):
                raise EgressRefusedError(_shown(name))
            addresses, by_exact_name = [literal], False
        else:
            matching = [entry for entry in self.entries if entry.matches_name(name, port)]
            if not matching and not granted:
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
