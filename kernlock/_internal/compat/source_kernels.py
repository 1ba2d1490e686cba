"""Hub kernels a Python source file loads by name, read from its text (AST), never imported.

A call counts when its arguments are literals, as Transformers writes them:

* `get_kernel("kernels-community/rwkv", version=1)` (also `revision="…"`, and
  `get_kernel_hub`, Transformers' alias of kernels' own);
* `lazy_load_kernel("finegrained-fp8")`, resolved through Transformers'
  `_HUB_KERNEL_MAPPING` (`table`), itself read from `integrations/hub_kernels.py`.

`imports` lists the modules a file imports (relative imports resolved against its
package), so a caller can follow them inside one installed package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from kernlock._internal.fs.bounded_read import SOURCE_LIMIT, UnreadableFile, read_bounded

GET_KERNEL_NAMES = frozenset({"get_kernel", "get_kernel_hub"})
LAZY_NAMES = frozenset({"lazy_load_kernel"})
HUB_KERNEL_TABLE = "_HUB_KERNEL_MAPPING"


class KernelCall(NamedTuple):
    """One literal kernel load in source: the repo, its version or revision, and where."""

    repo: str
    version: int | None
    revision: str | None
    site: str  # `models/rwkv/modeling_rwkv.py:52`, relative to the package root read


def _parse(path: Path) -> ast.Module | None:
    """The module's AST; None for a file that cannot be read or parsed (not Python, too deep)."""
    try:
        return ast.parse(read_bounded(path, SOURCE_LIMIT), filename=str(path))
    except (UnreadableFile, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return _NOT_LITERAL


_NOT_LITERAL = object()


def _kwargs(call: ast.Call) -> dict[str, object]:
    return {k.arg: _literal(k.value) for k in call.keywords if k.arg is not None}


def _call(
    call: ast.Call, table: Mapping[str, Mapping[str, object]]
) -> tuple[str, object, object] | None:
    """(repo, version, revision) of a literal kernel-loading call, else None."""
    name = _name(call.func)
    first = _literal(call.args[0]) if call.args else None
    if name in LAZY_NAMES and isinstance(first, str):
        entry = table.get(first)
        if entry is None:
            return None
        version, revision = entry.get("version"), entry.get("revision")
        return str(entry.get("repo_id")), version if version or revision else 1, revision
    if name not in GET_KERNEL_NAMES:
        return None
    kwargs = _kwargs(call)
    repo = first if call.args else kwargs.get("repo_id")
    if not isinstance(repo, str) or "/" not in repo:
        return None
    return repo, kwargs.get("version"), kwargs.get("revision")


def kernel_calls(
    path: Path, root: Path, table: Mapping[str, Mapping[str, object]] | None = None
) -> list[KernelCall]:
    """Every literal kernel load in `path`, with its site relative to `root`."""
    tree = _parse(path)
    if tree is None:
        return []
    try:
        where = path.relative_to(root).as_posix()
    except ValueError:
        where = path.as_posix()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        call = _call(node, table or {})
        if call is None:
            continue
        repo, version, revision = call
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            continue
        if revision is not None and not isinstance(revision, str):
            continue
        found.append(KernelCall(repo, version, revision, f"{where}:{node.lineno}"))
    return found


def hub_kernel_table(hub_kernels_source: Path) -> dict[str, dict[str, object]]:
    """Transformers' `_HUB_KERNEL_MAPPING` (kernel name → repo_id, version/revision), from its
    source."""
    tree = _parse(hub_kernels_source)
    for node in ast.walk(tree) if tree is not None else ():
        target: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, assigned = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, assigned = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id == HUB_KERNEL_TABLE:
            value = _literal(assigned)
            if isinstance(value, dict):
                return {str(k): dict(v) for k, v in value.items() if isinstance(v, dict)}
    return {}


def imports(path: Path, package_root: Path) -> Iterator[Path]:
    """The source files of the modules `path` imports that lie inside `package_root`'s package."""
    tree = _parse(path)
    if tree is None:
        return
    package = package_root.name
    here = path.parent
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here
                for _ in range(node.level - 1):
                    base = base.parent
            elif node.module and node.module.split(".")[0] == package:
                base, node_module = package_root.parent, node.module
                yield from _module_files(base, node_module, node.names)
                continue
            else:
                continue
            yield from _module_files(base, node.module, node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    yield from _module_files(package_root.parent, alias.name, ())


def _module_files(base: Path, module: str | None, names: Iterable[ast.alias]) -> Iterator[Path]:
    """`base/module.py` (or its package `__init__.py`), and `from module import name` submodules."""
    directory = base.joinpath(*module.split(".")) if module else base
    for candidate in (directory.with_suffix(".py"), directory / "__init__.py"):
        if module and candidate.is_file():
            yield candidate
            break
    for alias in names:
        submodule = directory / f"{alias.name}.py"
        if submodule.is_file():
            yield submodule
