"""An inventory target's health URLs (``Target.health``) and the restart check that requests them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.verification import Verification
from tools.builtin.services import restart_verification
from tools.errors import InventoryError
from tools.inventory import load_inventory
from tools.verification import restart_health

GOOD = "http://10.0.0.3:8000/healthz"


def inventory(tmp_path: Path, health: object) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"targets": [{"name": "web-03", "via": "runner", "health": health}]}))
    return path


def test_an_inventory_gives_a_service_its_health_url(tmp_path: Path) -> None:
    [target] = list(load_inventory(inventory(tmp_path, {"api": GOOD, "nginx.service": "https://web-03/ok"})))
    assert dict(target.health) == {"api": GOOD, "nginx.service": "https://web-03/ok"}


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://10.0.0.3/",
        "http://user:secret@10.0.0.3/health",  # credentials in the file, and in every card
        "http:///health",  # no host
        "http://10.0.0.3/he alth",
        "http://10.0.0.3:99999/",
        "http://10.0.0.3/\nInjected: header",
        "x" * 2100,
        12,
    ],
)
def test_a_hostile_health_url_stops_the_inventory_at_load(tmp_path: Path, url: object) -> None:
    with pytest.raises(InventoryError, match="health"):
        load_inventory(inventory(tmp_path, {"api": url}))


def test_a_service_name_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="health"):
        load_inventory(inventory(tmp_path, {"api; rm -rf /": GOOD}))


def test_a_restart_of_a_service_with_a_health_url_checks_it_too() -> None:
    declared = restart_verification("systemd")
    for service in ("api", "api.service"):
        found = restart_health(
            declared.derive({"service": service}), "service_restart", {"service": service}, {"api": GOOD}
        )
        assert found is not None and found.health is not None
        assert (found.health.tool, found.health.arguments) == ("http_check", f'{{"url":"{GOOD}"}}')
        assert found.health.passed(f"OK: GET {GOOD} -> 200 OK in 3 ms", False, 0.0)
        assert not found.health.passed(
            f"FAIL: GET {GOOD} -> 503 Service Unavailable (error status)", False, 0.0
        )
        # what the approval stores round-trips, and the card's "Then checks" line shows it
        assert Verification.from_json(found.to_json()) == found
        [(_label, text)] = [line for line in found.card_lines() if line[0] == "Then checks"]
        assert f'and http_check {{"url":"{GOOD}"}}' in text
    other = declared.derive({"service": "nginx"})
    assert restart_health(other, "service_restart", {"service": "nginx"}, {"api": GOOD}) == other
    # another tool naming a service never gets one, nor does a verification without a check
    assert restart_health(other, "service_status", {"service": "api"}, {"api": GOOD}) == other
    undo_only = Verification(no_undo="gone")
    assert restart_health(undo_only, "service_restart", {"service": "api"}, {"api": GOOD}) == undo_only


def test_a_verification_without_health_keeps_its_stored_form() -> None:
    """Approvals stored before health URLs existed still match what is derived now."""
    found = restart_verification("systemd").derive({"service": "api"})
    assert "health" not in found.to_json()
