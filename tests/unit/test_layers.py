"""The layers of kernlock's package tree (issue 26): a package imports only the packages below it.

The layers are the packages of `kernlock._internal` (issue 35: a private inside), plus `errors`,
`testing` and `__main__` beside the facade at the top.

Counted as the cycle test counts them: every import, also inside functions. The ranks are the
architecture page's table (docs/explanation/architecture.md); `resolve` and `runtime` never import each other, `rules` never
imports `verify` or `cli`, and `verify` never imports `resolve`, `fetch` or `runtime` (ranks keep it so).
"""

from __future__ import annotations

import pytest

from test_import_cycles import import_graph

pytestmark = pytest.mark.unit

RANKS: dict[str, float] = {  # lower first; a package may import its own modules and any package of a lower rank
    "errors": 0, "settings": 0.5,  # settings raises errors' UsageError
    "fs": 0.7,  # atomic writes, TOML, the private per-user directory
    "wording": 0.5, "distribution": 0.5,  # counting words in messages; the installed version
    "spec": 1,  # the lock's vocabulary: specs, targets, overrides, ids, advisories
    "host": 1.5,  # the running machine: detects a Target (spec), used by compat
    "compat": 2,
    "lockfile": 2.5,  # the lock file: its model, reading/writing, parse cache, kernels' JSON (uses compat)
    "hub": 3, "oci": 3,  # oci: kernels as OCI artifacts (registry, layout, the artifact shape)
    "store": 4,
    "project": 5,
    "rules": 6,  # the guards and the findings a lock must meet
    "resolve": 7, "fetch": 7, "verify": 7,  # verify: the command's checks and report
    "runtime": 8,
    "cli": 9, "__main__": 10,
    "testing": 9,  # the bundled test Hub: imports nothing of kernlock's but itself
}
NEVER = {("resolve", "runtime"), ("runtime", "resolve"), ("resolve", "fetch"), ("fetch", "resolve")}


def layer(module: str) -> str | None:
    """The layer of `kernlock` that `module` belongs to (a package of `kernlock._internal`, or `errors`,
    `testing`, `__main__` at the top); None for the facade and `kernlock._internal` itself."""
    parts = module.split(".")
    if parts[1:2] == ["_internal"]:
        return parts[2] if len(parts) > 2 else None
    return parts[1] if len(parts) > 1 else None


def violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in sorted(graph.items()):
        mine = layer(module)
        for other in sorted(imported):
            theirs = layer(other)
            if mine is None or theirs is None or mine == theirs:
                continue  # the lazy facade, `import kernlock` (for __version__), or within one package
            if RANKS[theirs] >= RANKS[mine] or (mine, theirs) in NEVER:
                found.append(f"{module} imports {other} ({mine} may not import {theirs})")
    return found


def test_every_module_is_in_a_ranked_layer() -> None:
    assert {layer(m) for m in import_graph()} - {None} <= set(RANKS)


def test_no_package_imports_upward() -> None:
    assert violations(import_graph()) == []


def test_the_rule_finds_an_upward_import() -> None:
    graph = {"kernlock._internal.verify.checks": {"kernlock._internal.runtime.apply"},
             "kernlock._internal.runtime.apply": {"kernlock._internal.resolve.relock"},
             "kernlock._internal.spec.kernel_spec": {"kernlock.errors"}}
    assert violations(graph) == [
        "kernlock._internal.runtime.apply imports kernlock._internal.resolve.relock (runtime may not import resolve)",
        "kernlock._internal.verify.checks imports kernlock._internal.runtime.apply (verify may not import runtime)",
    ]


def test_the_facade_exports_exactly_its_typed_names_and_lists_them() -> None:
    """`kernlock`'s lazy exports, its `TYPE_CHECKING` re-exports, `__all__` and `dir()` name the same API."""
    import ast
    import importlib

    import kernlock

    tree = ast.parse(importlib.util.find_spec("kernlock").loader.get_source("kernlock"))  # type: ignore[attr-defined]  # a source loader
    block = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    typed = {alias.asname for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == set(kernlock._EXPORTS)
    assert sorted(kernlock.__all__) == sorted({"__version__", *typed}) == dir(kernlock)
    for name in kernlock.__all__:
        assert getattr(kernlock, name) is not None
    with pytest.raises(ModuleNotFoundError):  # no module-path shims: the old 0.1 paths were never released
        importlib.import_module("kernlock.environment")


def test_the_package_top_is_the_facade_and_a_private_inside() -> None:
    """At most 6 public modules at `kernlock/`'s top; everything else lives under `kernlock/_internal/`."""
    from test_import_cycles import PACKAGE

    public = sorted(p.name for p in PACKAGE.iterdir()
                    if not p.name.startswith("_") or p.name in {"__init__.py", "__main__.py"})
    public = [name for name in public if name.endswith(".py") or (PACKAGE / name / "__init__.py").exists()]
    assert public == ["__init__.py", "__main__.py", "errors.py", "testing"]
    assert len(public) <= 6


def test_every_module_is_at_most_450_lines() -> None:
    """Issue 35: a module over 450 lines is split by concept."""
    from test_import_cycles import PACKAGE

    long = {str(path.relative_to(PACKAGE.parent)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 450}
    assert long == {}
