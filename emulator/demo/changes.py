"""What changed on the demo's hosts: their package logs, their watched configuration, and the page's
**Edit web-03's nginx config** button.

``write_change_traces(root, now, host=...)`` gives a simulated host what a Debian host keeps of its
changes: ``var/log/dpkg.log`` (and a rotated ``dpkg.log.1``) and ``var/log/apt/history.log`` with
upgrades days before the demo starts (nothing the demo's incidents follow from: the change journal
must show them as history, not as a cause), and ``etc/nginx`` (web-03) or ``etc/pgbouncer``
(db-01), the configuration its runner watches (``WATCHED``, the inventory's ``watch:``).

The button edits web-03's live site config the way a person on the host would (a new
``client_max_body_size``, written in place): the next scan of web-03's runner records the change
with its diff, and "what changed on web-03?" finds it.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from emulator.demo.logs import DAY, DB_HOST, WEB_HOST
from emulator.slack.page_buttons import PageButton

WATCHED: Mapping[str, tuple[str, ...]] = {WEB_HOST: ("/etc/nginx",), DB_HOST: ("/etc/pgbouncer",)}
"""Per host, the paths its runner watches (absolute on the host; under its root in the demo)."""

SITE = "etc/nginx/sites-enabled/orders-api"
_BODY_SIZES = ("64m", "1m", "16m", "8m")  # what each press sets, in turn

_PACKAGES: Mapping[str, tuple[tuple[float, str, str, str], ...]] = {
    # (days before now, package, old version, new version)
    WEB_HOST: (
        (12.2, "openssl", "3.0.13-1~deb12u1", "3.0.15-1~deb12u1"),
        (4.3, "nginx", "1.22.1-9", "1.22.1-9+deb12u1"),
        (4.3, "nginx-common", "1.22.1-9", "1.22.1-9+deb12u1"),
    ),
    DB_HOST: (
        (9.1, "postgresql-15", "15.7-0+deb12u1", "15.8-0+deb12u1"),
        (9.1, "libpq5", "15.7-0+deb12u1", "15.8-0+deb12u1"),
    ),
}

_CONFIG: Mapping[str, Mapping[str, str]] = {
    WEB_HOST: {
        "etc/nginx/nginx.conf": (
            "user www-data;\nworker_processes auto;\npid /run/nginx.pid;\n\nevents {\n"
            "    worker_connections 768;\n}\n\nhttp {\n    sendfile on;\n    keepalive_timeout 65;\n"
            "    access_log /var/log/nginx/access.log;\n    error_log /var/log/nginx/error.log;\n"
            "    include /etc/nginx/sites-enabled/*;\n}\n"
        ),
        SITE: (
            "upstream orders_api {\n    server 127.0.0.1:8000;\n}\n\nserver {\n    listen 443 ssl;\n"
            "    server_name orders.example.com;\n    client_max_body_size 8m;\n\n    location / {\n"
            "        proxy_pass http://orders_api;\n        proxy_read_timeout 30s;\n    }\n}\n"
        ),
    },
    DB_HOST: {
        "etc/pgbouncer/pgbouncer.ini": (
            "[databases]\norders = host=127.0.0.1 port=5432 dbname=orders\n\n[pgbouncer]\n"
            "listen_addr = 0.0.0.0\nlisten_port = 6432\npool_mode = transaction\n"
            "max_client_conn = 400\ndefault_pool_size = 40\n"
        ),
    },
}


def _stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def write_change_traces(root: Path, now: float, host: str) -> None:
    """The host's dpkg and apt logs and its watched configuration, as they were when it started."""
    logs = root / "var" / "log"
    (logs / "apt").mkdir(parents=True, exist_ok=True)
    dpkg: list[str] = []
    history: list[str] = []
    for days, package, old, new in _PACKAGES[host]:
        at = now - days * DAY
        dpkg += [
            f"{_stamp(at)} startup packages configure",
            f"{_stamp(at)} upgrade {package}:amd64 {old} {new}",
            f"{_stamp(at + 2)} status installed {package}:amd64 {new}",
        ]
        history += [
            f"Start-Date: {_stamp(at - 5).replace(' ', '  ')}",
            "Commandline: apt-get -y upgrade",
            "Requested-By: deploy (1001)",
            f"Upgrade: {package}:amd64 ({old}, {new})",
            f"End-Date: {_stamp(at + 3).replace(' ', '  ')}",
            "",
        ]
    older, newer = dpkg[:3], dpkg[3:]  # logrotate moved the oldest upgrade to dpkg.log.1
    (logs / "dpkg.log.1").write_text("\n".join(older) + "\n")
    (logs / "dpkg.log").write_text("\n".join(newer) + "\n" if newer else "")
    (logs / "apt" / "history.log").write_text("\n".join(history))
    for relative, text in _CONFIG[host].items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


class NginxEditButton:
    """The page's button that edits web-03's site config (``root`` is web-03's simulated root)."""

    def __init__(self, root: Path) -> None:
        self._site = root / SITE
        self._sizes = itertools.cycle(_BODY_SIZES)
        self._lock = threading.Lock()

    def page_button(self) -> PageButton:
        return PageButton(
            id="edit-nginx",
            label="✏️ Edit web-03's nginx config",
            title=(
                "Change client_max_body_size in web-03's /etc/nginx/sites-enabled/orders-api, as someone "
                "on the host would: its runner's next scan records the change with its diff"
            ),
            press=self.press,
        )

    def press(self, _user: str) -> str:
        with self._lock:
            size = next(self._sizes)
            lines = self._site.read_text().splitlines(keepends=True)
            edited = [
                f"    client_max_body_size {size};\n"
                if line.strip().startswith("client_max_body_size")
                else line
                for line in lines
            ]
            temporary = self._site.with_name(self._site.name + ".tmp")
            temporary.write_text("".join(edited))
            os.replace(temporary, self._site)  # whole, as an editor saves it: a scan never sees half
        return (
            f"web-03's /etc/nginx/sites-enabled/orders-api now says client_max_body_size {size}; "
            "ask the bot what changed on web-03"
        )
