"""deploy/docker/requirements.lock against pyproject.toml: the image installs exactly what it says.

The Dockerfile installs the lock with ``--require-hashes`` and then chatops with ``--no-deps``, so a
dependency added to pyproject.toml but not to the lock would be missing from the image, and one
whose pin no longer satisfies pyproject.toml would be the wrong version. Both are caught here,
offline: the lock must pin every runtime dependency (and everything those need, as the test venv's
installed metadata says) at a version pyproject.toml accepts, each with its sha256 hashes, for
every Python 3.11 the image may have: Debian bookworm's is 3.11.2, where redis also needs
async-timeout (a marker the test venv's newer 3.11 never meets, so a lock resolved only here
broke the image build).
"""

from __future__ import annotations

import platform
import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "deploy" / "docker" / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.*?))?\s*\\?$")
# The interpreters the image may run: Debian bookworm's python3 and the one running these tests.
PYTHONS = ("3.11.2", platform.python_version())


def pins() -> dict[str, tuple[str, int, Marker | None]]:
    """name -> (version, number of hashes, marker) of every entry of the lock."""
    found: dict[str, tuple[str, int, Marker | None]] = {}
    name = ""
    for line in LOCK.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            name = canonicalize_name(match.group(1))
            assert name not in found, f"{name} is pinned twice"
            found[name] = (match.group(2), 0, Marker(match.group(3)) if match.group(3) else None)
        elif line.strip().startswith("--hash=sha256:") and name:
            version, hashes, marker = found[name]
            found[name] = (version, hashes + 1, marker)
        elif line.strip() and not line.startswith("#") and not line.startswith(" "):
            raise AssertionError(
                f"{LOCK.name}: unexpected line {line!r} (options belong on pip's command line)"
            )
    return found


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_every_runtime_dependency_is_pinned_at_a_version_pyproject_accepts_with_hashes() -> None:
    locked = pins()
    wrong = []
    for requirement in runtime_requirements():
        pinned = locked.get(canonicalize_name(requirement.name))
        if pinned is None:
            wrong.append(f"{requirement.name}: not in the lock")
        elif not requirement.specifier.contains(pinned[0], prereleases=True):
            wrong.append(f"{requirement.name}=={pinned[0]} does not satisfy {requirement}")
    assert wrong == [], "run `make lock`: " + "; ".join(wrong)
    assert all(hashes >= 1 for _, hashes, _ in locked.values()), "every pin needs its --hash lines"


def environment(python: str, extra: str = "") -> dict[str, str]:
    return {"python_full_version": python, "python_version": python.rsplit(".", 1)[0], "extra": extra}


def test_the_lock_holds_what_the_dependencies_themselves_need_on_every_python_3_11() -> None:
    """The closure, by the installed packages' own metadata (the test venv has them, but for
    those only another Python needs, such as async-timeout: those are not walked further)."""
    locked = pins()
    missing: set[str] = set()
    for python in PYTHONS:
        todo = [(requirement, frozenset(requirement.extras)) for requirement in runtime_requirements()]
        seen: set[str] = set()
        while todo:
            requirement, extras = todo.pop()
            name = canonicalize_name(requirement.name)
            pinned = locked.get(name)
            if pinned is None or (pinned[2] is not None and not pinned[2].evaluate(environment(python))):
                missing.add(f"{name} (Python {python})")
                continue
            key = f"{name}[{','.join(sorted(extras))}]"
            if key in seen:
                continue
            seen.add(key)
            try:
                needs = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                continue
            for text in needs:
                needed = Requirement(text)
                environments = [environment(python, extra) for extra in extras] or [environment(python)]
                if needed.marker is None or any(needed.marker.evaluate(env) for env in environments):
                    todo.append((needed, frozenset(needed.extras)))
    assert missing == set(), f"run `make lock`: the lock lacks {sorted(missing)}"


def test_the_dockerfile_installs_the_lock_with_hashes_and_chatops_without_dependencies() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "deploy/docker/requirements.lock" in dockerfile
    assert "--require-hashes" in dockerfile and "-r /src/requirements.lock" in dockerfile
    assert "--no-deps /src" in dockerfile
    assert "!deploy/docker/requirements.lock" in (ROOT / ".dockerignore").read_text()
