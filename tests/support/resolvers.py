"""A resolver with a fixed table (like /etc/hosts), recording every name it is asked about.

Injected into ``tools.egress.EgressPolicy`` so tests can use names such as ``api.corp.example``
and prove which names were (or were never) looked up, without touching real DNS.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tools.resolver import Resolution


@dataclass
class StaticResolver:
    table: Mapping[str, Sequence[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def resolve(self, name: str, timeout: float) -> Resolution:
        self.asked.append(name)
        if name not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return Resolution(tuple(self.table[name]))

    def reverse(self, address: str, timeout: float) -> tuple[str, list[str]]:
        self.asked.append(address)
        for name, addresses in self.table.items():
            if address in addresses:
                return name, []
        raise socket.herror(1, "Unknown host")
