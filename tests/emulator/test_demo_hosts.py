"""The demo hosts' own machines: ``df``, ``uptime``, ``free``, ``ps`` and ``largest-files`` describe the
simulated host (``emulator.demo.system``), never this machine; the demo's catalog makes the real
host-health tools run them; the alert button's webhook is a fresh Alertmanager delivery each press."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from emulator.demo.alert import AlertButton, alertmanager_payload
from emulator.demo.catalog import write_catalog
from emulator.demo.changes import SITE, WATCHED, NginxEditButton
from emulator.demo.commands import memory_columns, percent_used
from emulator.demo.host import DemoHost, build_host
from emulator.demo.system import HostSystem
from emulator.slack import SlackEmulator, SlackEmulatorClient
from emulator.slack.client import ControlApiError
from emulator.slack.page_buttons import PageButton
from tests.emulator.slack.receiver import Received, Receiver
from tests.support.emulator_workspace import make_config
from tools.catalog import load_catalog


def run(host: DemoHost, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(host.bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=30
    )


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DemoHost]:
    base = tmp_path_factory.mktemp("hosts")
    return {name: build_host(base / name, base / "bin" / name, name=name) for name in ("web-03", "db-01")}


def use_percent(df_output: str, mount: str) -> int:
    [row] = [line for line in df_output.splitlines() if line.endswith(f" {mount}")]
    return int(re.findall(r"(\d+)% ", row)[-1])


def test_web_03s_log_volume_is_full_of_its_logs_and_frees_what_a_clean_up_deletes(tmp_path: Path) -> None:
    host = build_host(tmp_path / "web-03", tmp_path / "bin", name="web-03")
    system = HostSystem(host.root)
    [volume] = [disk for disk in system.machine.disks if disk.mount == "/var/log"]
    before = run(host, "df", "-h", str(host.log_dir))
    assert before.returncode == 0 and "/dev/vdb" in before.stdout
    assert use_percent(before.stdout, "/var/log") == percent_used(system.used(volume), volume.size) >= 95
    # The machine's own disk is never what df shows (its root is not the host's).
    machine = psutil.disk_usage("/")
    assert f"{machine.total // 2**30}G" not in before.stdout.split("\n", 1)[1]

    old = sorted((host.log_dir / "api").glob("api.log-*"))[:6]
    freed = sum(path.stat().st_size for path in old)
    for path in old:
        path.unlink()
    after = run(host, "df", "-h", "/var/log")  # the host's own path means the same disk
    assert use_percent(after.stdout, "/var/log") == percent_used(system.used(volume), volume.size) < 50
    assert system.used(volume) == volume.base_used + system.log_bytes()
    assert freed > 25 * 2**20


def load1(host: DemoHost) -> float:
    """The 1-minute load average the host's ``uptime`` says."""
    return float(re.findall(r"load average: ([0-9.]+),", run(host, "uptime").stdout)[0])


def test_processes_and_load_follow_the_hosts_services(hosts: dict[str, DemoHost], tmp_path: Path) -> None:
    web = build_host(tmp_path / "web-03", tmp_path / "bin", name="web-03")
    top = run(web, "ps", "--sort=-pcpu", "--lines=5").stdout
    assert re.search(r"^\s+2315 api .* gunicorn: worker \[orders-api\]$", top, re.MULTILINE)
    assert 7 < load1(web) < 9  # 7.92, give or take its noise
    assert subprocess.run([str(web.bin_dir / "systemctl"), "restart", "api"], check=False).returncode == 0
    pid = json.loads((web.state_dir / "units.json").read_text())["api.service"]["MainPID"]
    assert f"{pid + 1} api" in run(web, "ps", "--sort=-pcpu").stdout  # the restarted api's workers
    subprocess.run([str(web.bin_dir / "systemctl"), "stop", "api"], check=True)
    assert "orders-api" not in run(web, "ps", "--sort=-pmem").stdout  # a stopped service is gone
    assert load1(web) < 0.5

    db = run(hosts["db-01"], "ps", "--sort=-pcpu", "--lines=3").stdout.splitlines()
    assert "pgbouncer" in db[1]  # healthy: no query hogs a CPU
    assert "(8 CPUs)" in run(hosts["db-01"], "uptime").stdout and load1(hosts["db-01"]) < 1
    assert "32G" in run(hosts["db-01"], "free", "-h").stdout
    # Nothing of this machine: none of its process names or users appears.
    mine = {p.info["name"] for p in psutil.process_iter(["name"]) if p.info["name"]}
    listed = {line.split(None, 6)[-1].split()[0] for line in db[1:-1]}
    assert not (listed & mine) - {"postgres", "pgbouncer"}


@pytest.mark.parametrize("used_share", [0.0, 0.5, 0.88, 0.93, 1.0])
def test_free_adds_up_and_never_shows_negative_memory(used_share: float) -> None:
    total = 8 * 2**30
    used, free, cache, available = memory_columns(total, int(total * used_share))
    assert min(used, free, cache, available) >= 0
    assert used + free + cache == total and available == total - used


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "/proc",
        "/var/log/../../../../root",
        "relative",
        "/nope",
        "{root}/../db-01/var/log",
        "{link}",
    ],
)
def test_a_path_outside_the_host_is_one_the_host_does_not_have(hosts: dict[str, DemoHost], path: str) -> None:
    web = hosts["web-03"]
    link = web.log_dir / "escape"  # a symlink a hostile log rotation left, pointing at this machine's root
    if not link.is_symlink():
        link.symlink_to("/")
    path = path.format(root=web.root, link=link)
    for argv in (["df", "-h", path], ["largest-files", path, "5"]):
        answer = run(web, *argv)
        assert answer.returncode == 1 and answer.stdout == "", answer
        assert "No such file or directory" in answer.stderr or "not an absolute path" in answer.stderr


def test_largest_files_of_the_root_lists_the_hosts_files_only(hosts: dict[str, DemoHost]) -> None:
    web = hosts["web-03"]
    listing = run(web, "largest-files", "/", "50").stdout
    paths = [line.split(None, 1)[1] for line in listing.splitlines()[1:]]
    # its logs, configuration, runtime state and its simulated pool's state (var/lib/pool)
    assert paths and all(p.startswith(("/var/log/", "/etc/", "/run/", "/var/lib/pool/")) for p in paths), (
        paths
    )
    under = run(web, "largest-files", str(web.log_dir), "3").stdout
    assert f"under {web.log_dir} " in under and str(web.log_dir / "api" / "api.log-") in under


def test_the_catalog_overrides_the_builtin_health_tools_with_the_hosts_commands(tmp_path: Path) -> None:
    catalog = load_catalog(
        write_catalog(tmp_path / "tools.yaml"),
        env={},
        builtin_names={"disk_usage", "cpu_load", "memory", "top_processes", "largest_files"},
    )
    assert sorted(tool.definition.name for tool in catalog.tools) == [
        "cpu_load",
        "disk_usage",
        "largest_files",
        "memory",
        "pool_scale",
        "pool_status",
        "top_processes",
    ]
    # the health tools override the built-ins; web-03's pool tools are the catalog's own
    assert set(catalog.overrides) == {"cpu_load", "disk_usage", "largest_files", "memory", "top_processes"}


def test_web_03s_pool_scales_in_its_own_state_file_and_db_01_has_none(hosts: dict[str, DemoHost]) -> None:
    web, db = hosts["web-03"], hosts["db-01"]
    assert json.loads(run(web, "pool", "status", "web").stdout) == {
        "pool": "web",
        "replicas": 3,
        "state": "running",
    }
    assert json.loads(run(web, "pool", "scale", "web", "6").stdout)["replicas"] == 6
    assert json.loads((web.root / "var" / "lib" / "pool" / "web.json").read_text())["replicas"] == 6
    assert run(web, "pool", "scale", "web", "51").returncode == 2  # beyond what the catalog allows
    assert run(web, "pool", "status", "../../etc/hostname").returncode == 1  # a pool's name, nothing else
    assert run(db, "pool", "status", "web").returncode == 1
    assert json.loads(run(web, "pool", "scale", "web", "3").stdout)["replicas"] == 3


def test_each_alert_press_is_a_fresh_alertmanager_delivery_with_the_token() -> None:
    now = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
    first, second = alertmanager_payload(1, now), alertmanager_payload(2, now + timedelta(seconds=5))
    assert first["version"] == "4" and first["status"] == "firing" and first["receiver"] == "chatops"
    assert first["alerts"][0]["startsAt"] == "2026-12-03T10:00:00.000Z"
    assert second["alerts"][0]["startsAt"] == "2026-12-03T10:00:05.000Z"
    assert first["groupKey"] != second["groupKey"]
    assert first["alerts"][0]["fingerprint"] != second["alerts"][0]["fingerprint"]
    assert first["commonLabels"]["instance"] == "db-01:9100"

    received: list[Received] = []
    clock = iter([now, now + timedelta(seconds=1)])
    receiver = Receiver()
    try:
        button = AlertButton(receiver.url, "tok3n", clock=lambda: next(clock))
        with SlackEmulator(make_config()) as slack:
            slack.core.page_buttons.add(button.page_button())
            client = SlackEmulatorClient(slack.url)
            assert [b["id"] for b in client.state()["page_buttons"]] == ["fire-alert"]
            assert "answered 200" in client.press("fire-alert", "U_ALICE")
            assert "answered 200" in client.press("fire-alert", "U_ALICE")
            received = receiver.wait_for(2)
    finally:
        receiver.close()
    assert {r.headers["authorization"] for r in received} == {"Bearer tok3n"}
    bodies = [json.loads(r.body) for r in received]
    assert bodies[0]["alerts"][0]["startsAt"] != bodies[1]["alerts"][0]["startsAt"]
    assert bodies[0]["groupKey"] != bodies[1]["groupKey"]


def test_a_page_button_is_pressed_by_its_id_and_an_unknown_one_is_a_404() -> None:
    with SlackEmulator(make_config()) as slack:
        slack.core.page_buttons.add(PageButton("b", "B", "t", lambda user: f"pressed by {user}"))
        client = SlackEmulatorClient(slack.url)
        assert client.press("b", "U_BOB") == "pressed by U_BOB"
        with pytest.raises(ControlApiError) as refused:
            client.press("nope", "U_BOB")
        assert refused.value.status == 404


def test_the_hosts_keep_package_logs_and_the_configuration_their_runners_watch(
    hosts: dict[str, DemoHost],
) -> None:
    web, db = hosts["web-03"], hosts["db-01"]
    dpkg = (web.log_dir / "dpkg.log").read_text() + (web.log_dir / "dpkg.log.1").read_text()
    assert re.search(
        r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d upgrade nginx:amd64 1\.22\.1-9 1\.22\.1-9\+deb12u1$", dpkg, re.M
    )
    assert "Requested-By: deploy (1001)" in (web.log_dir / "apt" / "history.log").read_text()
    assert "upgrade postgresql-15:amd64" in (db.log_dir / "dpkg.log.1").read_text()  # rotated
    assert "upgrade libpq5:amd64" in (db.log_dir / "dpkg.log").read_text()
    for host in (web, db):
        for watched in WATCHED[host.name]:
            assert any((host.root / watched.lstrip("/")).iterdir()), watched


def test_the_nginx_button_edits_web_03s_site_config_whole_each_press(tmp_path: Path) -> None:
    web = build_host(tmp_path / "web-03", tmp_path / "bin", name="web-03")
    site = web.root / SITE
    before = site.read_text()
    button = NginxEditButton(web.root)
    sizes = []
    for _ in range(3):
        said = button.press("U_ALICE")
        sizes.append(re.findall(r"client_max_body_size (\w+);", site.read_text()))
        assert "ask the bot what changed on web-03" in said
    assert sizes == [["64m"], ["1m"], ["16m"]]  # one line changed per press, never two
    after = site.read_text().splitlines()
    assert [a for a, b in zip(after, before.splitlines(), strict=True) if a != b] == [
        "    client_max_body_size 16m;"
    ]
    assert sorted(p.name for p in site.parent.iterdir()) == ["orders-api"]  # no temporary left
