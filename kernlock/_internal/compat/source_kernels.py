"""Hub kernels a Python source file loads by name, read from its text (AST), never imported.

A call counts when its arguments are literals, as Transformers writes them:

* `get_kernel("kernels-community/rwkv", version=1)` (also `revision="…"`, and
  `get_kernel_hub`, Transformers' alias of kernels' own);
* `lazy_load_kernel("finegrained-fp8")`, resolved through Transformers'
  `_HUB_KERNEL_MAPPING` (`table`), itself read from `integrations/hub_kernels.py`.

A call under `if torch.version.hip:` is a ROCm load, one in its `else` (or after an `if` whose
body returns) a CUDA one (`KernelCall.device`); any other call has no device.

`imports` lists the modules a file imports (relative imports resolved against its
package), and `walk` follows them inside one installed package; `package_calls` reads
the calls of named modules of an installed package (TRL's trainers a project imports).
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from kernlock._internal.fs.bounded_read import SOURCE_LIMIT, UnreadableFile, read_bounded

GET_KERNEL_NAMES = frozenset({"get_kernel", "get_kernel_hub"})
LAZY_NAMES = frozenset({"lazy_load_kernel"})
HUB_KERNEL_TABLE = "_HUB_KERNEL_MAPPING"
FILE_LIMIT = 400  # source files followed per start: Transformers' import graph is far smaller
_ROCM_TESTS = ("version.hip", "is_rocm", "is_hip")


class KernelCall(NamedTuple):
    """One literal kernel load in source: the repo, its version or revision, and where."""

    repo: str
    version: int | None
    revision: str | None
    site: str  # `models/rwkv/modeling_rwkv.py:52`, relative to the package root read
    device: str | None = None  # "rocm" or "cuda" where an `if torch.version.hip` decides


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


def _is_rocm_test(test: ast.expr) -> bool:
    return any(marker in ast.unparse(test) for marker in _ROCM_TESTS)


def _ends(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def _with_devices(body: list[ast.stmt], device: str | None) -> Iterator[tuple[ast.AST, str | None]]:
    """Every node under `body`, with the device type its `if torch.version.hip` branches imply."""
    for statement in body:
        if isinstance(statement, ast.If) and _is_rocm_test(statement.test):
            yield from _with_devices(statement.body, "rocm")
            yield from _with_devices(statement.orelse, "cuda")
            if _ends(statement.body):
                device = "cuda"  # what follows `if hip: return …` runs on CUDA only
            continue
        for node in ast.iter_child_nodes(statement):
            if isinstance(node, ast.ExceptHandler):
                yield from _with_devices(node.body, device)
            elif not isinstance(node, ast.stmt):
                yield from ((n, device) for n in ast.walk(node))
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(statement, field, None)
            if isinstance(inner, list):
                yield from _with_devices(inner, device)


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
    try:
        nodes = list(_with_devices(tree.body, None))
    except RecursionError:
        return []  # nested past what Python's own compiler takes: no call a runtime could make
    found = []
    for node, device in nodes:
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
        found.append(KernelCall(repo, version, revision, f"{where}:{node.lineno}", device))
    return sorted(set(found), key=lambda c: (c.site, c.repo))


def walk(
    starts: Iterable[Path], package_root: Path, within: tuple[str, ...] = ("",)
) -> Iterator[Path]:
    """`starts` and the modules they import transitively, kept to `package_root`'s `within` dirs
    (a package's `__init__.py`, which re-exports everything, is not followed)."""
    allowed = tuple(package_root / d for d in within)
    seen: set[Path] = set()
    stack = list(starts)
    while stack and len(seen) < FILE_LIMIT:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        yield path
        stack.extend(
            p
            for p in imports(path, package_root)
            if p not in seen
            and p.name != "__init__.py"
            and any(p.is_relative_to(a) for a in allowed)
        )


def package_root(package: str) -> Path | None:
    """The source folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def package_calls(modules: Iterable[str], root: Path) -> list[KernelCall]:
    """The literal kernel loads of the named modules of the package at `root`
    (`trl.experimental.async_grpo`) and of the modules they import inside it, each site relative
    to the package's parent."""
    starts = [
        path for module in dict.fromkeys(modules) for path in _module_files(root.parent, module, ())
    ]
    files = list(walk(starts, root))
    return sorted(
        {call for path in files for call in kernel_calls(path, root.parent)},
        key=lambda c: (c.site, c.repo),
    )


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
