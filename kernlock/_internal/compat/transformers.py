"""What the installed Transformers would do with a kernel spec, read without importing it.

Transformers keeps its Hub-kernel decisions in module-level tables (the default
version per kernel repo, the `flash_attention_N` fallbacks, the accepted
`kernels` window). Importing Transformers takes seconds, so this module reads
these tables from its source for any target; a table it cannot evaluate falls
back to importing Transformers. It is the one place kernlock reads Transformers'
internals (as `kernlock._internal.compat.kernels_api` is for kernels'); the names it relies on
are the `TRANSFORMERS_*` constants below, and the contract tests
(`tests/test_compat.py`) compare what it reads with the imported values.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
from pathlib import Path
from typing import Any, NamedTuple

from kernlock._internal.host import installed_version
from kernlock._internal.spec.target import Target

# Transformers' tables, read from its source (importing Transformers takes seconds).
TRANSFORMERS_TABLES = {
    "FLASH_ATTN_KERNEL_VERSIONS": (
        "modeling_flash_attention_utils.py",
        "transformers.modeling_flash_attention_utils",
    ),
    "FLASH_ATTN_KERNEL_FALLBACK": (
        "modeling_flash_attention_utils.py",
        "transformers.modeling_flash_attention_utils",
    ),
    # Transformers <= 5.17: flash-attention version -> kernel version, matched against the repo name
    "_FLASH_ATTN_KERNEL_VERSION_MAPPING": (
        "integrations/hub_kernels.py",
        "transformers.integrations.hub_kernels",
    ),
}
TRANSFORMERS_KERNELS_WINDOW = (
    "utils/import_utils.py",
    "KERNELS_MIN_VERSION",
    "KERNELS_MAX_VERSION",
)
TRANSFORMERS_HUB_KERNELS = (
    "transformers.integrations.hub_kernels",
    "get_kernel_mapping_transformers",
    "_HUB_KERNEL_MAPPING",
)


# Used only when Transformers is not installed (values of Transformers 5.22).
_FALLBACK_ALIASES = {
    "flash_attention_2": "kernels-community/flash-attn2",
    "flash_attention_3": "kernels-community/vllm-flash-attn3",
    "flash_attention_4": "kernels-community/flash-attn4",
}


class TransformersInfo(NamedTuple):
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
    root = (
        Path(next(iter(spec.submodule_search_locations)))
        if spec and spec.submodule_search_locations
        else None
    )
    return TransformersInfo(version=version, root=root)


def default_version(repo: str, target: Target) -> tuple[int, str]:
    """The version Transformers loads for a bare `attn_implementation=repo`, and why.

    Mirrors what Transformers' Hub-kernel integration does for attention kernels.
    """
    info = installed_transformers()
    if info.version is None or info.root is None:
        return 1, "kernels default 1 (Transformers is not installed)"
    table = transformers_table(info.root, "FLASH_ATTN_KERNEL_VERSIONS", target)
    if table is None:
        table = transformers_live_table("FLASH_ATTN_KERNEL_VERSIONS")
    if table is None:  # Transformers <= 5.17
        table = _flash_version_by_name(repo, info.root, target)
    version = table.get(repo, 1)
    if repo in table:
        return version, f"default of transformers {info.version} on torch {target.torch_version}"
    return version, f"transformers {info.version} default for kernels outside its table"


def _flash_version_by_name(repo: str, root: Path, target: Target) -> dict[str, int]:
    """`{repo: version}` as Transformers <= 5.17 picks it (`get_attn_kernel_version`): the first
    flash-attention version N of `_FLASH_ATTN_KERNEL_VERSION_MAPPING` whose `.*flash.*N` matches
    the repo name; `{}` for the default (1)."""
    import re

    name = "_FLASH_ATTN_KERNEL_VERSION_MAPPING"
    mapping = transformers_table(root, name, target) or transformers_live_table(name) or {}
    for flash, version in mapping.items():
        if re.match(rf".*flash.*{flash}", repo):
            return {repo: version}
    return {}


def alias_repo(alias: str, target: Target | None) -> str:
    """The Hub kernel Transformers falls back to for `flash_attention_N` without flash-attn
    (`target` None: no target known)."""
    root = installed_transformers().root
    table = transformers_table(root, "FLASH_ATTN_KERNEL_FALLBACK", target) if root else None
    if table is None and root is not None:
        table = transformers_live_table("FLASH_ATTN_KERNEL_FALLBACK")
    return (table or _FALLBACK_ALIASES)[alias]


@functools.lru_cache(maxsize=1)
def kernels_window() -> tuple[str, str] | None:
    """`(min, max)` versions of kernels the installed Transformers accepts (outside it, it skips Hub
    kernels)."""
    root = installed_transformers().root
    return transformers_kernels_window(root) if root is not None else None


def use_kernels_repos() -> list[tuple[str, int | None, str | None]]:
    """Hub kernels that `use_kernels=True` can load: `(repo, version, revision)` each.

    Imports Transformers (this source is opt-in).
    """
    return transformers_hub_kernels()


# ---------------------------------------------------------------- reading Transformers' source


class UnsupportedExpression(Exception):
    """A table entry `transformers_table` cannot evaluate from source."""


def transformers_table(root: Path, name: str, target: Target | None) -> dict | None:
    """Transformers' table `name` as it evaluates on `target`, read from its source under `root`.

    Understands the conditional entries (`4 if is_torch_greater_or_equal("2.10") else 3`);
    None when the table is missing or uses something else, or a condition with no `target` to decide
    it (then use `transformers_live_table`).
    """
    relative, _ = TRANSFORMERS_TABLES[name]
    node = _module_assignments(root / relative).get(name)
    if node is None:
        return None
    try:
        value = _evaluate(node, target)
    except UnsupportedExpression:
        return None
    return value if isinstance(value, dict) else None


def _evaluate(node: ast.expr, target: Target | None) -> Any:
    """Evaluate constant tables with Torch-version and ROCm conditions for `target`."""
    from packaging.version import Version

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        return {
            _evaluate(k, target): _evaluate(v, target)
            for k, v in zip(node.keys, node.values, strict=False)
            if k is not None
        }
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_evaluate(e, target) for e in node.elts)
    if isinstance(node, ast.IfExp):
        return _evaluate(node.body if _evaluate(node.test, target) else node.orelse, target)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _evaluate(node.operand, target)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and target is not None:
        torch = Version(target.torch_version)
        if node.func.id == "is_rocm_platform":
            return target.backend.startswith("rocm")
        if node.func.id in ("is_torch_greater_or_equal", "is_torch_less_or_equal") and node.args:
            wanted = Version(str(_evaluate(node.args[0], target)))
            return (
                torch >= wanted if node.func.id == "is_torch_greater_or_equal" else torch <= wanted
            )
    raise UnsupportedExpression(ast.dump(node))


@functools.lru_cache(maxsize=16)
def _module_assignments(path: Path) -> dict[str, ast.expr]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            found[node.targets[0].id] = node.value
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
        ):
            found[node.target.id] = node.value
    return found


def transformers_live_table(name: str) -> dict | None:
    """Table `name` from the imported Transformers (slow; when its source cannot be evaluated)."""
    _, module = TRANSFORMERS_TABLES[name]
    try:
        imported = importlib.import_module(module)
    except Exception:
        return None
    value = getattr(imported, name, None)
    return dict(value) if isinstance(value, dict) else None


def transformers_kernels_window(root: Path) -> tuple[str, str] | None:
    """`(KERNELS_MIN_VERSION, KERNELS_MAX_VERSION)` from Transformers' source (a line match: the
    module is large)."""
    import re

    relative, low, high = TRANSFORMERS_KERNELS_WINDOW
    try:
        data = (root / relative).read_bytes()
    except OSError:
        return None
    # Every apply() reads this 130 KB file: bytes (no decoding), and lines found by their "\n"
    # rather than `^` with MULTILINE, whose literal prefix lets `re` skip ahead (six times fewer
    # instructions in all).
    pattern = rf"""\n({low}|{high})\s*=\s*["']([^"']+)["']""".encode()
    found = {
        name.decode(): value.decode("utf-8", "replace")
        for name, value in re.findall(pattern, b"\n" + data)
    }
    return (found[low], found[high]) if low in found and high in found else None


# asked at every kernelize (each train()/eval()); Transformers builds the table once
@functools.lru_cache(maxsize=1)
def kernelize_requests() -> frozenset[tuple[str, int | None, str | None]]:
    """`(repo, version, revision)` of every repository in Transformers' kernelize mapping (imports
    it)."""
    module_name, getter_name, _ = TRANSFORMERS_HUB_KERNELS
    found: set[tuple[str, int | None, str | None]] = set()
    _visit_repositories(getattr(importlib.import_module(module_name), getter_name)(), found)
    return frozenset(found)


def trainer_callback_class() -> type:
    """Transformers' `TrainerCallback` (imports it)."""
    return importlib.import_module("transformers.trainer_callback").TrainerCallback


def _visit_repositories(value: object, found: set[tuple[str, int | None, str | None]]) -> None:
    """Add the `(repo, version, revision)` of every kernels Layer/FuncRepository inside `value` to
    `found`."""
    if isinstance(value, dict):
        for item in value.values():
            _visit_repositories(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _visit_repositories(item, found)
    elif isinstance(repo_id := getattr(value, "_repo_id", None), str):
        found.add((repo_id, getattr(value, "_version", None), getattr(value, "_revision", None)))


def transformers_hub_kernels() -> list[tuple[str, int | None, str | None]]:
    """Hub kernels Transformers' `use_kernels=True` maps layers to: `(repo, version, revision)` each
    (imports it)."""
    module_name, getter_name, table_name = TRANSFORMERS_HUB_KERNELS
    hub_kernels = importlib.import_module(module_name)
    found: set[tuple[str, int | None, str | None]] = set()

    getter = getattr(hub_kernels, getter_name, None)
    if getter is not None:
        _visit_repositories(getter(), found)
    for entry in getattr(hub_kernels, table_name, {}).values():
        found.add((entry["repo_id"], entry.get("version"), entry.get("revision")))
    return sorted(found, key=lambda item: (item[0], str(item[1]), str(item[2])))
