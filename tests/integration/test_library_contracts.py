"""Contract tests: the kernels and Transformers internals kernlock relies on still hold.

Each failure names the internal that changed (see `kernlock._internal.compat.kernels_api`); run
against every supported kernels line by the matrix (`noxfile.py`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernlock
from kernlock._internal.compat import kernels_api as kernels_adapter
from kernlock._internal.compat import kernels_json_lock, kernels_patch
from kernlock._internal.compat.kernels_api import LINES, line, line_for, target_decisions
from kernlock._internal.compat.kernels_contract import broken_internals, check_internal, internals
from kernlock._internal.compat.kernels_json_lock import KernelsPin
from kernlock._internal.compat.transformers import (
    alias_repo,
    default_version,
    installed_transformers,
    kernels_window,
    transformers_hub_kernels,
)
from kernlock._internal.spec.target import parse_target

PACKAGE = Path(kernlock.__file__).parent


@pytest.mark.parametrize("internal", internals(), ids=[i.dotted for i in internals()])
def test_kernels_internal_holds(internal) -> None:
    assert check_internal(internal) is None


def test_a_changed_internal_is_named(monkeypatch) -> None:
    import importlib

    variants = importlib.import_module(kernels_adapter.module_name("variants"))
    monkeypatch.setattr(variants, "_resolve_variant_for_system", lambda variants, selected_backend: None)
    name = variants.__name__
    macos = kernels_adapter.line().MACOS  # kernels 0.16 has no macOS dimension
    if macos:
        monkeypatch.delattr(variants, "_METAL_MIN_MACOS_VERSION")
    assert broken_internals() == [
        f"{name}._resolve_variant_for_system: no longer accepts cpu, os, torch_version, torch_cxx11_abi, "
        "tvm_ffi_version" + (", macos_version" if macos else "")
        + (", python_version, free_threaded" if kernels_adapter.line().PYTHON_ABI else ""),
        *([f"{name}._METAL_MIN_MACOS_VERSION: missing (module '{name}' has no attribute '_METAL_MIN_MACOS_VERSION')"]
          if macos else []),
    ]


def test_the_line_follows_the_kernels_version() -> None:
    assert [line_for(v).__name__.rsplit("_", 1)[-1] for v in ("0.16.2", "0.17.2", "0.18.3", "0.19.1", "0.20.0", None)] == [
        "016", "017", "018", "019", "019", "019",
    ]
    assert line() is line_for(kernels_adapter.installed_version("kernels"))


def test_another_lines_contract_names_exactly_what_moved() -> None:
    """Checked against the installed kernels, each other line's contract names the modules that moved between them."""
    installed = line()
    for other in LINES:
        if other is installed:
            continue
        broken = broken_internals(other)
        assert broken, f"{other.__name__} holds against kernels {kernels_adapter.installed_version('kernels')}"
        if other.ROOT != installed.ROOT:  # 0.19 moved every module: each private one is named, nothing else
            private = [i for i in internals(other) if i.module not in ("kernels", "kernels._rust")]
            named = [b.split(":")[0] for b in broken]
            public = [n for n in named if n.rsplit(".", 1)[0] in ("kernels", "kernels._rust")]
            assert [n for n in named if n not in public] == [i.dotted for i in private]
            # beside them only the public API may differ (kernels 0.16: Metadata has no kernel_depends, no _rust)
            assert not public or installed.FIRST == (0, 16) or other.FIRST == (0, 16)


# The one package allowed to import each library (statically or by `importlib.import_module("...")`).
ADAPTERS = {"kernels": "compat", "transformers": "compat"}


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
    """Every other kernlock module reaches kernels and Transformers through `kernlock._internal.compat`."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        parts = parts[1:] if parts[0] == "_internal" else parts  # the layer: compat is kernlock/_internal/compat
        if "testing" in parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            offenders += [f"{path.relative_to(PACKAGE)}:{node.lineno} {name}" for name in _imported_names(node)  # type: ignore[attr-defined]  # names come only from imports and calls, which have one
                          if ADAPTERS.get(name.split(".")[0], parts[0]) != parts[0]]
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
    if not line().MACOS:  # kernels 0.16 ranks no macOS version
        return
    old_mac = target_decisions(metal, parse_target("torch2.9-metal-aarch64-darwin-macos15.4"))[0]
    assert not old_mac.accepted and "system macOS version is 15.4" in old_mac.reason


@pytest.mark.skipif(not line().JSON_LOCK, reason="kernels 0.16's own lock is its older format")
def test_kernels_json_lock_round_trips() -> None:
    pins = [KernelsPin("org/a", 2, None, "a" * 40), KernelsPin("org/b", None, "dev", "b" * 40)]
    assert kernels_json_lock.parse_kernels_lock(kernels_json_lock.kernels_lock_json(pins)) == pins
    with pytest.raises(ValueError):
        kernels_json_lock.parse_kernels_lock('version = 1\n')


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
    import importlib

    _parse_local_kernel_overrides = importlib.import_module(kernels_adapter.module_name("load"))._parse_local_kernel_overrides

    value = "org/a=/x/a:org/b=rel/b=c"
    assert kernels_adapter.local_kernel_overrides(value) == _parse_local_kernel_overrides(value)
    for parse in (kernels_adapter.local_kernel_overrides, _parse_local_kernel_overrides):
        with pytest.raises(ValueError, match="Invalid LOCAL_KERNELS entry: nope"):
            parse("org/a=/x:nope")


def test_every_patched_kernels_module_is_under_contract() -> None:
    covered = {internal.module for internal in internals()}
    assert set(kernels_patch.patch_points()) <= covered, set(kernels_patch.patch_points()) - covered


def test_the_transformers_names_the_default_kernelize_patch_wraps_exist() -> None:
    """runtime.default_kernels wraps these Transformers names; a release that moves one must fail here, not at a run."""
    import importlib

    from kernlock._internal.compat.transformers import kernelize_requests, trainer_callback_class
    from kernlock._internal.runtime.default_kernels import PATCHED

    for dotted in PATCHED:
        module_name, _, rest = dotted.partition(".PreTrainedModel.") if ".PreTrainedModel." in dotted else (
            dotted.rsplit(".", 1)[0], "", dotted.rsplit(".", 1)[1])
        module = importlib.import_module(module_name)
        owner = module.PreTrainedModel if ".PreTrainedModel." in dotted else module
        assert rest in vars(owner), f"{dotted} moved"
    assert ("kernels-community/liger-kernels", 4, None) in kernelize_requests()
    assert trainer_callback_class().__name__ == "TrainerCallback"
