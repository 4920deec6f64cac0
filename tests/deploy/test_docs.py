"""README and docs/DEPLOY.md: two set-up commands, a pointer to the deployment guide, no
instructions for a tool that is not installed, and no path in the guide that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DEPLOY = ROOT / "docs" / "DEPLOY.md"


def section(text: str, heading: str) -> str:
    match = re.search(rf"^(#+) {re.escape(heading)}\n(.*?)(?=^#{{1,3}} |\Z)", text, flags=re.M | re.S)
    assert match, heading
    return match.group(2)


def test_the_readme_keeps_exactly_two_set_up_commands() -> None:
    blocks = re.findall(r"^```\n(.*?)^```$", section(README, "Two commands"), flags=re.M | re.S)
    assert [block.strip() for block in blocks] == ["make demo", "make test"]


def test_the_readme_points_a_real_workspace_to_the_deployment_guide() -> None:
    assert "(docs/DEPLOY.md)" in section(README, "Connect a real workspace and a real model")
    assert "honcho" not in README


def test_no_doc_tells_to_run_honcho() -> None:
    for doc in (ROOT / "docs").glob("*.md"):
        assert "honcho start" not in doc.read_text(), doc.name


def test_every_path_the_guide_names_exists() -> None:
    text = DEPLOY.read_text()
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    named = re.findall(r"`((?:deploy|docs|tests)/[A-Za-z0-9_./@-]+)`", text)
    assert links and named
    for link in links:
        assert (DEPLOY.parent / link).exists(), link
    for path in named:
        assert (ROOT / path.rstrip("/")).exists(), path


def test_the_guide_covers_what_an_sre_needs() -> None:
    headings = re.findall(r"^## (.+)$", DEPLOY.read_text(), flags=re.M)
    for needed in (
        "TLS",
        "load balancer",
        "Socket Mode",
        "Redis",
        "Upgrades",
        "systemd",
        "Kubernetes",
        "Compose",
    ):
        assert any(needed in heading for heading in headings), needed
    text = DEPLOY.read_text()
    assert "at most 10" in text and "appendfsync" in text and "Backups" in text
