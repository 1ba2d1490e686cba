"""Contract tests: the kernels and Transformers internals kernlock relies on still hold.

Each failure names the internal that changed (see `kernlock.kernels_adapter`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernlock
from kernlock import kernels_adapter
from kernlock.environment import parse_target
from kernlock.kernels_adapter import INTERNALS, KernelsPin, check_internal, target_decisions
from kernlock.transformers_compat import (
    alias_repo,
    default_version,
    installed_transformers,
    kernels_window,
    transformers_hub_kernels,
)

PACKAGE = Path(kernlock.__file__).parent


@pytest.mark.parametrize("internal", INTERNALS, ids=[i.dotted for i in INTERNALS])
def test_kernels_internal_holds(internal) -> None:
    assert check_internal(internal) is None


def test_a_changed_internal_is_named(monkeypatch) -> None:
    import kernels.variants

    monkeypatch.setattr(kernels.variants, "_resolve_variant_for_system", lambda variants, selected_backend: None)
    monkeypatch.delattr(kernels.variants, "_METAL_MIN_MACOS_VERSION")
    assert kernels_adapter.broken_internals() == [
        "kernels.variants._resolve_variant_for_system: no longer accepts cpu, os, torch_version, torch_cxx11_abi, "
        "tvm_ffi_version, macos_version",
        "kernels.variants._METAL_MIN_MACOS_VERSION: missing (module 'kernels.variants' has no attribute "
        "'_METAL_MIN_MACOS_VERSION')",
    ]


# The one module allowed to import each package (statically or by `importlib.import_module("...")`).
ADAPTERS = {"kernels": "kernels_adapter.py", "transformers": "transformers_compat.py"}


def _imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def test_only_the_adapters_import_kernels_or_transformers() -> None:
    """Every other kernlock module reaches kernels through `kernels_adapter`, Transformers through `transformers_compat`."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "testing" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            offenders += [f"{path.relative_to(PACKAGE)}:{node.lineno} {name}" for name in _imported_names(node)
                          if ADAPTERS.get(name.split(".")[0], path.name) != path.name]
    assert offenders == []


def test_tvm_ffi_and_macos_versions_are_target_fields() -> None:
    names = ["tvm-ffi01-cu128-x86_64-linux", "torch212-cxx11-cu128-x86_64-linux"]
    plain = target_decisions(names, parse_target("torch2.12-cxx11-cu128-x86_64-linux"))
    assert [(d.variant, d.accepted) for d in plain] == [
        ("torch212-cxx11-cu128-x86_64-linux", True), ("tvm-ffi01-cu128-x86_64-linux", False),
    ]
    assert "tvm-ffi version (0.1) does not match environment tvm-ffi version (None)" in plain[1].reason
    tvm_only = parse_target("torch2.12-cxx11-cu128-x86_64-linux-tvm-ffi0.1")
    assert str(tvm_only) == "torch2.12-cxx11-cu128-x86_64-linux-tvm-ffi0.1"
    assert target_decisions(["tvm-ffi01-cu128-x86_64-linux"], tvm_only)[0].accepted  # a tvm-ffi-only kernel locks

    metal = ["torch29-metal-aarch64-darwin"]
    assert target_decisions(metal, parse_target("torch2.9-metal-aarch64-darwin"))[0].accepted
    old_mac = target_decisions(metal, parse_target("torch2.9-metal-aarch64-darwin-macos15.4"))[0]
    assert not old_mac.accepted and "system macOS version is 15.4" in old_mac.reason


def test_kernels_json_lock_round_trips() -> None:
    pins = [KernelsPin("org/a", 2, None, "a" * 40), KernelsPin("org/b", None, "dev", "b" * 40)]
    assert kernels_adapter.parse_kernels_lock(kernels_adapter.kernels_lock_json(pins)) == pins
    with pytest.raises(ValueError):
        kernels_adapter.parse_kernels_lock('version = 1\n')


def test_transformers_tables_read_from_source_match_the_imported_ones() -> None:
    from transformers import modeling_flash_attention_utils as flash
    from transformers.utils import import_utils

    target = parse_target("torch2.13-cxx11-cpu-x86_64-linux")
    for repo, version in flash.FLASH_ATTN_KERNEL_VERSIONS.items():
        assert default_version(repo, target)[0] == version, repo
    for alias, repo in flash.FLASH_ATTN_KERNEL_FALLBACK.items():
        assert alias_repo(alias, target) == repo, alias
    assert kernels_window() == (import_utils.KERNELS_MIN_VERSION, import_utils.KERNELS_MAX_VERSION)
    assert installed_transformers().root is not None
    assert transformers_hub_kernels(), "Transformers' use_kernels mapping is empty or moved"


def test_local_kernels_parsing_matches_kernels() -> None:
    from kernels.load import _parse_local_kernel_overrides

    value = "org/a=/x/a:org/b=rel/b=c"
    assert kernels_adapter.local_kernel_overrides(value) == _parse_local_kernel_overrides(value)
    for parse in (kernels_adapter.local_kernel_overrides, _parse_local_kernel_overrides):
        with pytest.raises(ValueError, match="Invalid LOCAL_KERNELS entry: nope"):
            parse("org/a=/x:nope")


def test_every_patched_kernels_module_is_under_contract() -> None:
    covered = {internal.module for internal in INTERNALS}
    assert set(kernels_adapter.PATCH_POINTS) <= covered, set(kernels_adapter.PATCH_POINTS) - covered
