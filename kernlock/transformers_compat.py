"""What the installed Transformers would do with a kernel spec, read without importing it.

Transformers keeps its Hub-kernel decisions in module-level tables
(`FLASH_ATTN_KERNEL_VERSIONS`, `FLASH_ATTN_KERNEL_FALLBACK`, the accepted
`kernels` window). Importing Transformers takes seconds, so these tables are
read from its source with a small AST evaluator that understands the
conditional entries (`4 if is_torch_greater_or_equal("2.10") else 3`) for any
target. An entry it cannot evaluate falls back to importing Transformers.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from kernlock.environment import Target, installed_version

# Used only when Transformers is not installed (values of Transformers 5.22).
_FALLBACK_ALIASES = {
    "flash_attention_2": "kernels-community/flash-attn2",
    "flash_attention_3": "kernels-community/vllm-flash-attn3",
    "flash_attention_4": "kernels-community/flash-attn4",
}


class _Unsupported(Exception):
    pass


@dataclass(frozen=True)
class TransformersInfo:
    """The installed Transformers release, if any, and where its source lives."""

    version: str | None
    root: Path | None


@functools.lru_cache(maxsize=1)
def installed_transformers() -> TransformersInfo:
    """Locate Transformers without importing it."""
    version = installed_version("transformers")
    if version is None:
        return TransformersInfo(version=None, root=None)
    spec = importlib.util.find_spec("transformers")
    root = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    return TransformersInfo(version=version, root=root)


@functools.lru_cache(maxsize=16)
def _module_assignments(relative: str) -> dict[str, ast.expr]:
    info = installed_transformers()
    if info.root is None:
        return {}
    path = info.root / relative
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            found[node.target.id] = node.value
    return found


def _evaluate(node: ast.expr, target: Target):
    """Evaluate constant tables with Torch-version and ROCm conditions for `target`."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {_evaluate(k, target): _evaluate(v, target) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_evaluate(e, target) for e in node.elts)
    if isinstance(node, ast.IfExp):
        return _evaluate(node.body if _evaluate(node.test, target) else node.orelse, target)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, target)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        torch = Version(target.torch_version)
        if node.func.id == "is_rocm_platform":
            return target.backend.startswith("rocm")
        if node.func.id in ("is_torch_greater_or_equal", "is_torch_less_or_equal") and node.args:
            wanted = Version(str(_evaluate(node.args[0], target)))
            return torch >= wanted if node.func.id == "is_torch_greater_or_equal" else torch <= wanted
    raise _Unsupported(ast.dump(node))


def _table(relative: str, name: str, target: Target) -> dict | None:
    node = _module_assignments(relative).get(name)
    if node is None:
        return None
    try:
        value = _evaluate(node, target)
    except _Unsupported:
        return None
    return value if isinstance(value, dict) else None


def _live_table(module: str, name: str) -> dict | None:
    try:
        imported = importlib.import_module(module)
    except Exception:
        return None
    value = getattr(imported, name, None)
    return dict(value) if isinstance(value, dict) else None


def default_version(repo: str, target: Target) -> tuple[int, str]:
    """The version Transformers loads for a bare `attn_implementation=repo`, and why.

    Mirrors `transformers.integrations.hub_kernels.get_attn_kernel_version`.
    """
    info = installed_transformers()
    if info.version is None:
        return 1, "kernels default 1 (Transformers is not installed)"
    table = _table("modeling_flash_attention_utils.py", "FLASH_ATTN_KERNEL_VERSIONS", target)
    if table is None:
        table = _live_table("transformers.modeling_flash_attention_utils", "FLASH_ATTN_KERNEL_VERSIONS") or {}
    version = table.get(repo, 1)
    if repo in table:
        return version, f"default of transformers {info.version} on torch {target.torch_version}"
    return version, f"transformers {info.version} default for kernels outside its table"


def alias_repo(alias: str, target: Target) -> str:
    """The Hub kernel Transformers falls back to for `flash_attention_N` without flash-attn."""
    table = _table("modeling_flash_attention_utils.py", "FLASH_ATTN_KERNEL_FALLBACK", target)
    if table is None and installed_transformers().version is not None:
        table = _live_table("transformers.modeling_flash_attention_utils", "FLASH_ATTN_KERNEL_FALLBACK")
    return (table or _FALLBACK_ALIASES)[alias]


@functools.lru_cache(maxsize=1)
def kernels_window() -> tuple[str, str] | None:
    """`(KERNELS_MIN_VERSION, KERNELS_MAX_VERSION)` the installed Transformers accepts.

    Read with a line match rather than a parse: the module is large and this runs at start-up.
    """
    root = installed_transformers().root
    if root is None:
        return None
    try:
        text = (root / "utils" / "import_utils.py").read_text(encoding="utf-8")
    except OSError:
        return None
    pattern = r"""^(KERNELS_M(?:IN|AX)_VERSION)\s*=\s*["']([^"']+)["']"""
    found = dict(re.findall(pattern, text, re.MULTILINE))
    if "KERNELS_MIN_VERSION" in found and "KERNELS_MAX_VERSION" in found:
        return found["KERNELS_MIN_VERSION"], found["KERNELS_MAX_VERSION"]
    return None


def use_kernels_repos() -> list[tuple[str, int | None, str | None]]:
    """Hub kernels that `use_kernels=True` can load: `(repo, version, revision)` each.

    Imports Transformers (this source is opt-in).
    """
    from transformers.integrations import hub_kernels

    found: set[tuple[str, int | None, str | None]] = set()

    def visit(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(getattr(value, "_repo_id", None), str):  # kernels' Layer/FuncRepository
            found.add((value._repo_id, getattr(value, "_version", None), getattr(value, "_revision", None)))

    mapping_getter = getattr(hub_kernels, "get_kernel_mapping_transformers", None)
    if mapping_getter is not None:
        visit(mapping_getter())
    for entry in getattr(hub_kernels, "_HUB_KERNEL_MAPPING", {}).values():
        found.add((entry["repo_id"], entry.get("version"), entry.get("revision")))
    return sorted(found, key=lambda item: (item[0], str(item[1]), str(item[2])))
