"""What the import contracts in ``pyproject.toml`` cannot say: no package imports itself in a circle.

Inside every package of ``agent/``, ``tools/`` and ``bot/`` (the top levels included), its modules
and sub-packages (each taken whole) import each other without a cycle, so every module can be
read, tested and moved knowing only what is below it. An import inside a function counts, and so
does a type-only one (``if TYPE_CHECKING:``): both are a dependency, only hidden. A cycle that
must stay goes in ``ALLOWED`` with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import grimp
import pytest

PRODUCT = ("agent", "tools", "bot")

# The modules of a cycle kept on purpose -> why it cannot be broken. Empty: none is.
ALLOWED: dict[frozenset[str], str] = {}


def child_imports(graph: grimp.ImportGraph, package: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(child, child it imports) -> the module imports behind it, for ``package``'s children:
    its modules, and each sub-package as one node."""
    children = graph.find_children(package)
    owner = {child: child for child in children}
    for child in children:
        owner.update(dict.fromkeys(graph.find_descendants(child), child))
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module, child in owner.items():
        for imported in graph.find_modules_directly_imported_by(module):
            target = owner.get(imported)
            if target is not None and target != child:
                found.setdefault((child, target), []).append((module, imported))
    return found


def child_graph(graph: grimp.ImportGraph, package: str) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {child: set() for child in graph.find_children(package)}
    for child, target in child_imports(graph, package):
        edges[child].add(target)
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            group.append(node)
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def package_cycles(graph: grimp.ImportGraph) -> Iterator[tuple[str, list[str]]]:
    for package in sorted(module for module in graph.modules if graph.find_children(module)):
        for group in cycles(child_graph(graph, package)):
            yield package, group


def described(graph: grimp.ImportGraph, package: str, group: list[str]) -> str:
    """The cycle and the import lines that close it, for the failure message."""
    lines = [f"{package}: {', '.join(group)}"]
    for (child, target), imports in sorted(child_imports(graph, package).items()):
        if child in group and target in group:
            for importer, imported in sorted(imports):
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    lines.append(f"    {importer}:{detail['line_number']}  {detail['line_contents']}")
    return "\n".join(lines)


def test_no_package_has_an_import_cycle_among_its_own_modules() -> None:
    graph = grimp.build_graph(*PRODUCT, cache_dir=None)
    found = [(package, group) for package, group in package_cycles(graph) if frozenset(group) not in ALLOWED]
    assert not found, "import cycles inside a package:\n" + "\n".join(
        described(graph, package, group) for package, group in found
    )


def test_every_allowed_cycle_still_exists() -> None:
    graph = grimp.build_graph(*PRODUCT, cache_dir=None)
    present = {frozenset(group) for _, group in package_cycles(graph)}
    assert set(ALLOWED) <= present, "an allowed cycle is gone: take it off ALLOWED"


@pytest.mark.parametrize(
    ("imports", "expected"),
    [
        ([("p.a", "p.b"), ("p.b", "p.c")], []),
        ([("p.a", "p.b"), ("p.b", "p.a")], [("p", ["p.a", "p.b"])]),
        # A function-level import closing a circle of three; the sub-package counts as one node.
        ([("p.a", "p.b"), ("p.b", "p.sub.x"), ("p.sub.y", "p.a")], [("p", ["p.a", "p.b", "p.sub"])]),
        # Inside the sub-package only: its own cycle, not its parent's.
        (
            [("p.sub.x", "p.sub.y"), ("p.sub.y", "p.sub.x"), ("p.a", "p.sub.x")],
            [("p.sub", ["p.sub.x", "p.sub.y"])],
        ),
    ],
)
def test_the_cycle_finder_finds_what_it_must(imports: list[tuple[str, str]], expected: list[object]) -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.sub", "p.sub.x", "p.sub.y"):
        graph.add_module(module)
    for importer, imported in imports:
        graph.add_import(
            importer=importer, imported=imported, line_number=1, line_contents=f"import {imported}"
        )
    assert list(package_cycles(graph)) == expected
