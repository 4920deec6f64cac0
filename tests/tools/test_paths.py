"""AllowedDirs: paths stay inside the log directories; '..' and outbound symlinks are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.errors import PathNotAllowedError
from tools.paths import AllowedDirs


@pytest.fixture
def layout(tmp_path: Path) -> tuple[AllowedDirs, Path, Path]:
    logs = tmp_path / "logs"
    (logs / "app").mkdir(parents=True)
    (logs / "app" / "app.log").write_text("hello\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    return AllowedDirs([logs]), Path(os.path.realpath(logs)), secret


def test_absolute_and_relative_paths_inside_are_resolved(layout: tuple[AllowedDirs, Path, Path]) -> None:
    dirs, logs, _ = layout
    assert dirs.resolve(str(logs / "app" / "app.log")) == logs / "app" / "app.log"
    assert dirs.resolve("app/app.log") == logs / "app" / "app.log"
    assert dirs.resolve(None) == logs


@pytest.mark.parametrize("path", ["../secret.txt", "app/../../secret.txt", "app/../app/app.log"])
def test_dot_dot_is_refused_even_when_it_would_stay_inside(
    layout: tuple[AllowedDirs, Path, Path], path: str
) -> None:
    dirs, _, _ = layout
    with pytest.raises(PathNotAllowedError, match=r"'\.\.' is not allowed"):
        dirs.resolve(path)


def test_absolute_paths_outside_are_refused(layout: tuple[AllowedDirs, Path, Path]) -> None:
    dirs, _, secret = layout
    with pytest.raises(PathNotAllowedError, match="outside the log directories"):
        dirs.resolve(str(secret))
    with pytest.raises(PathNotAllowedError):
        dirs.resolve("/etc/shadow")


def test_a_symlink_pointing_outside_is_refused(layout: tuple[AllowedDirs, Path, Path]) -> None:
    dirs, logs, secret = layout
    (logs / "innocent.log").symlink_to(secret)
    (logs / "linkdir").symlink_to(secret.parent)
    with pytest.raises(PathNotAllowedError, match="it leads to"):
        dirs.resolve("innocent.log")
    with pytest.raises(PathNotAllowedError):
        dirs.resolve("linkdir/secret.txt")


def test_a_symlink_inside_the_log_dirs_is_fine(layout: tuple[AllowedDirs, Path, Path]) -> None:
    dirs, logs, _ = layout
    (logs / "current.log").symlink_to(logs / "app" / "app.log")
    assert dirs.resolve("current.log") == logs / "app" / "app.log"
