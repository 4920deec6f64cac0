"""What changed, through a real ``chatops runner`` process on a simulated host root: a package
upgrade, an edited watched file (its diff, a secret in it redacted), a deleted file, a new unit
file, a service restart and a reboot each reach ``recent_changes`` (as the worker answers it)
within one scan; a forged journal entry beside them never does."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from functools import partial
from pathlib import Path

import redis
import yaml

from bot.changes.journal import ChangeJournal
from bot.changes.reader import ChangeReader
from bot.fleet.heartbeats import Heartbeats
from bot.fleet.target_keys import target_key
from bot.keys import Keys
from emulator.demo.systemctl import install_units, write_systemctl
from tests.support.runners import SECRET, FleetSite
from tests.support.waiting import wait_for
from tools.inventory import Target

BOOT = time.time() - 3 * 86_400


def boot(root: Path, boot_id: str, at: float) -> None:
    random_dir = root / "proc" / "sys" / "kernel" / "random"
    random_dir.mkdir(parents=True, exist_ok=True)
    (random_dir / "boot_id").write_text(boot_id + "\n")
    (root / "proc" / "stat").write_text(f"cpu  1 2 3 4\nbtime {at:.0f}\n")


def write(root: Path, path: str, text: str) -> Path:
    file = root / path.lstrip("/")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    return file


def test_a_runners_scan_brings_each_kind_of_change_to_recent_changes_within_one_scan(
    site: FleetSite, heartbeats: Heartbeats, redis_client: redis.Redis, keys: Keys
) -> None:
    root = site.root("web-03")
    bin_dir = site.directory / "bin-web-03"
    write_systemctl(bin_dir, root)  # the host's systemctl (its units in root/run/systemd)
    install_units(root / "run" / "systemd", boot=BOOT)
    boot(root, str(uuid.uuid4()), BOOT)
    write(root, "/var/log/dpkg.log", "2026-11-01 09:00:00 upgrade curl:amd64 8.5.0-1 8.5.0-2\n")
    write(root, "/var/log/api/api.log", "")  # where its systemctl records the api's restarts
    write(root, "/etc/myapp/config.yaml", "listen: 8080\npassword=hunter2\n")
    gone = write(root, "/etc/myapp/old.conf", "legacy: true\n")
    inventory = yaml.safe_load(site.inventory_file.read_text())
    for target in inventory["targets"]:
        if target["name"] == "web-03":
            target["watch"] = ["/etc/myapp"]
    site.inventory_file.write_text(yaml.safe_dump(inventory))
    site.extra_env.update(
        CHATOPS_CHANGES_SCAN_SECONDS="1",
        CHATOPS_SERVICE_BACKEND="systemd",
        PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", os.defpath)]),
    )
    site.start("web-03", heartbeats)
    first = wait_for(lambda: last_scan(heartbeats), 60, "the runner's first scan")

    # What happens on the host between two scans.
    with (root / "var/log/dpkg.log").open("a") as dpkg:
        dpkg.write(time.strftime("%Y-%m-%d %H:%M:%S") + " upgrade nginx:amd64 1.24.0-1 1.24.0-2\n")
    write(root, "/etc/myapp/config.yaml", "listen: 8081\npassword=hunter3\n")
    gone.unlink()
    write(root, "/etc/systemd/system/backup.service", "[Service]\nExecStart=/usr/local/bin/backup\n")
    subprocess.run([str(bin_dir / "systemctl"), "restart", "api"], check=True, timeout=30)
    scan_after(heartbeats, first)
    # Then a reboot (a restart within minutes of a boot is the boot's own start: a scan of its own).
    boot(root, str(uuid.uuid4()), time.time() - 5)
    scan_after(heartbeats, first)

    journal = ChangeJournal(redis_client, keys, partial(target_key, SECRET.encode()))
    redis_client.zadd(keys.changes("web-03"), {'{"c":"{}","s":"forged"}': time.time()})
    web = (Target(name="web-03", via="runner"),)
    answer = ChangeReader(journal, lambda _c: (web, "web-03")).answer("web-03", "1d", None)
    for expected in (
        "| package | upgrade nginx 1.24.0-1 -> 1.24.0-2",
        "| file | edited /etc/myapp/config.yaml",
        "> +listen: 8081",
        "| file | deleted /etc/myapp/old.conf",
        "| unit | unit file created /etc/systemd/system/backup.service",
        "| restart | restart of api.service",
        "| reboot |",
    ):
        assert expected in answer, (expected, answer)
    assert "hunter" not in answer and str(root) not in answer and "forged" not in answer
    assert "upgrade curl" not in answer  # a month old: outside the window asked for


def scan_after(heartbeats: Heartbeats, first: float) -> None:
    """Wait for a scan that began after now: the one after the next completed scan."""
    seen = wait_for(lambda: heartbeats.get("web-03"), 10, "a heartbeat").seen_at

    def scanned(after: float) -> float | None:
        at = last_scan(heartbeats)
        return at if at is not None and at > after else None

    # A scan may be under way now, begun before the change: the one after it saw the change.
    done = wait_for(lambda: scanned(max(first, seen)), 60, "the scan under way")
    wait_for(lambda: scanned(done), 60, "a scan after the changes")


def last_scan(heartbeats: Heartbeats) -> float | None:
    beat = heartbeats.get("web-03")
    return beat.scanned_at if beat is not None else None
