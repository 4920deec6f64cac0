"""Name lookups for the network tools, behind an interface tests can replace.

The system resolver has no timeout of its own, so each lookup runs in a thread the caller stops
waiting for. ``interface_addresses`` lists where this host's own services listen.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Resolution:
    addresses: tuple[str, ...]
    canonical_name: str = ""


class Resolver(Protocol):
    """Name lookups; injected so tests can answer for names that do not exist."""

    def resolve(self, name: str, timeout: float) -> Resolution:
        """Addresses of ``name``; raises ``socket.gaierror`` or ``TimeoutError``."""
        ...

    def reverse(self, address: str, timeout: float) -> tuple[str, list[str]]:
        """The name and aliases of ``address``; raises ``socket.herror`` or ``TimeoutError``."""
        ...


def with_timeout(func: Callable[[], T], timeout: float) -> T:
    """Run a blocking call (the resolver has no timeout of its own) and give up after ``timeout``."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = func()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if worker.is_alive():
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value


class SystemResolver:
    """The system resolver (``getaddrinfo``, ``gethostbyaddr``), bounded by a timeout."""

    def resolve(self, name: str, timeout: float) -> Resolution:
        infos = with_timeout(
            lambda: socket.getaddrinfo(name, None, type=socket.SOCK_STREAM, flags=socket.AI_CANONNAME),
            timeout,
        )
        addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
        canonical = next((info[3] for info in infos if info[3]), "")
        return Resolution(addresses, canonical)

    def reverse(self, address: str, timeout: float) -> tuple[str, list[str]]:
        host, aliases, _ = with_timeout(lambda: socket.gethostbyaddr(address), timeout)
        return host, list(aliases)


def interface_addresses() -> list[str]:
    """Every address of this host's network interfaces (where its own services listen)."""
    import psutil

    families = (socket.AF_INET, socket.AF_INET6)
    return [
        item.address for items in psutil.net_if_addrs().values() for item in items if item.family in families
    ]
