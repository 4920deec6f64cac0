"""Addresses and names as the egress policy reads them (``tools.egress``): parsing, special ranges."""

from __future__ import annotations

import ipaddress
import re

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SPECIAL_RANGES: tuple[tuple[str, IPNetwork], ...] = tuple(
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
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
MAX_NAME_CHARS = 253


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
    for label, network in SPECIAL_RANGES:
        if address.version == network.version and address in network:
            return label
    return None


def is_host_name(name: str) -> bool:
    """``name`` (normalized) is a DNS name: letter-digit-hyphen labels (and ``_``), at most 253 characters."""
    labels = name.split(".")
    return 0 < len(name) <= MAX_NAME_CHARS and all(LABEL.fullmatch(label) for label in labels)
