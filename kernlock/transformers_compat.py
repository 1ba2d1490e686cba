"""What the installed Transformers would do with a kernel spec, read without importing it.

Transformers keeps its Hub-kernel decisions in module-level tables (the default
version per kernel repo, the `flash_attention_N` fallbacks, the accepted
`kernels` window). Importing Transformers takes seconds, so
`kernlock.kernels_adapter` reads these tables from its source for any target;
a table it cannot evaluate falls back to importing Transformers.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from kernlock import kernels_adapter
from kernlock.environment import Target, installed_version

# Used only when Transformers is not installed (values of Transformers 5.22).
_FALLBACK_ALIASES = {
    "flash_attention_2": "kernels-community/flash-attn2",
    "flash_attention_3": "kernels-community/vllm-flash-attn3",
    "flash_attention_4": "kernels-community/flash-attn4",
}


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


def default_version(repo: str, target: Target) -> tuple[int, str]:
    """The version Transformers loads for a bare `attn_implementation=repo`, and why.

    Mirrors what Transformers' Hub-kernel integration does for attention kernels.
    """
    info = installed_transformers()
    if info.version is None or info.root is None:
        return 1, "kernels default 1 (Transformers is not installed)"
    table = kernels_adapter.transformers_table(info.root, "FLASH_ATTN_KERNEL_VERSIONS", target)
    if table is None:
        table = kernels_adapter.transformers_live_table("FLASH_ATTN_KERNEL_VERSIONS") or {}
    version = table.get(repo, 1)
    if repo in table:
        return version, f"default of transformers {info.version} on torch {target.torch_version}"
    return version, f"transformers {info.version} default for kernels outside its table"


def alias_repo(alias: str, target: Target) -> str:
    """The Hub kernel Transformers falls back to for `flash_attention_N` without flash-attn."""
    root = installed_transformers().root
    table = kernels_adapter.transformers_table(root, "FLASH_ATTN_KERNEL_FALLBACK", target) if root else None
    if table is None and root is not None:
        table = kernels_adapter.transformers_live_table("FLASH_ATTN_KERNEL_FALLBACK")
    return (table or _FALLBACK_ALIASES)[alias]


@functools.lru_cache(maxsize=1)
def kernels_window() -> tuple[str, str] | None:
    """`(min, max)` versions of kernels the installed Transformers accepts (outside it, it skips Hub kernels)."""
    root = installed_transformers().root
    return kernels_adapter.transformers_kernels_window(root) if root is not None else None


def use_kernels_repos() -> list[tuple[str, int | None, str | None]]:
    """Hub kernels that `use_kernels=True` can load: `(repo, version, revision)` each.

    Imports Transformers (this source is opt-in).
    """
    return kernels_adapter.transformers_hub_kernels()
