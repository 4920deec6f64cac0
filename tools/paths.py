"""Keep file tools inside the directories they were given (the configured log directories)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from tools.errors import PathNotAllowedError


class AllowedDirs:
    """A set of root directories; a path is allowed when its real location is inside one.

    ``..`` is refused outright (even when it would stay inside), and symlinks are followed before
    the check, so a link pointing outside the roots is refused too.
    """

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(Path(root) for root in roots)
        self._real_roots = tuple(Path(os.path.realpath(root)) for root in self.roots)

    def describe(self) -> str:
        return ", ".join(str(root) for root in self.roots) or "(none configured)"

    def resolve(self, path: str | None) -> Path:
        """The real path of ``path`` (absolute, or relative to the first root holding it).

        ``None`` or an empty string means the first root.
        """
        if not self.roots:
            raise PathNotAllowedError("no log directories are configured (CHATOPS_LOG_DIRS)")
        if not path:
            return self._real_roots[0]
        if "\x00" in path:
            raise PathNotAllowedError("the path contains a NUL character")
        pure = PurePosixPath(path)
        if ".." in pure.parts:
            raise PathNotAllowedError(f"{path}: '..' is not allowed in paths")
        candidates = [Path(pure)] if pure.is_absolute() else [root / pure for root in self.roots]
        existing = [candidate for candidate in candidates if os.path.lexists(candidate)]
        chosen = (existing or candidates)[0]
        resolved = Path(os.path.realpath(chosen))
        if self.contains(resolved):
            return resolved
        via_link = f" (it leads to {resolved})" if str(resolved) != os.path.normpath(chosen) else ""
        raise PathNotAllowedError(f"{path} is outside the log directories ({self.describe()}){via_link}")

    def contains(self, real_path: Path) -> bool:
        """Whether an already-resolved path lies inside one of the roots."""
        return any(real_path == root or real_path.is_relative_to(root) for root in self._real_roots)

    def real_roots(self) -> tuple[Path, ...]:
        return self._real_roots
