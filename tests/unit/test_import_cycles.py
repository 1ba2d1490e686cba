"""No import cycles among kernlock's modules, counting imports inside functions too.

A cycle hidden behind a function-level import still ties two concepts together
(and breaks the moment someone hoists the import); the shared piece belongs in
a module both can import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kernlock"

ALLOWED_CYCLES: list[frozenset[str]] = []  # none: add one only with the reason it cannot be broken


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each kernlock module and the kernlock modules it imports anywhere in its body."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if name == "kernlock":  # the lazy facade: its `if TYPE_CHECKING:` imports are for type checkers only
            tree.body = [node for node in tree.body if not _type_checking_block(node)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parent + ([base] if base else []))
                found = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name].update(other for other in found if other in graph and other != name)
    return graph


def _type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    real = import_graph()
    assert "kernlock._internal.verify.checks" in real["kernlock._internal.cli.commands.verify"]  # imported inside the command function


def test_kernlock_has_no_import_cycles() -> None:
    found = cycles(import_graph())
    unexpected = [sorted(c) for c in found if not any(c <= allowed for allowed in ALLOWED_CYCLES)]
    assert unexpected == [], f"import cycles: {unexpected}; move the shared piece into a module both can import"
    stale = [sorted(a) for a in ALLOWED_CYCLES if not any(c <= a for c in found)]
    assert stale == [], f"allowed cycle {stale} is gone: delete it from ALLOWED_CYCLES"
