"""The one place kernlock touches private internals of `kernels`.

kernlock reuses kernels' variant ranking and backend detection, its resolver
protocol, its lock types and its `LOCAL_KERNELS` parser, and wraps its loaders.
None of these are public API and several moved within kernels 0.17.x, so every
use lives here, behind kernlock's own small types (`Decision`, `Target`, plain
tuples), and each internal is listed in `INTERNALS`: `broken_internals()` (run
by the contract tests) names the internal that changed. (Transformers' internals
are read in `kernlock.transformers_compat`.)

Over 400 lines on purpose: the whole private surface of kernels that kernlock
depends on, and the `INTERNALS` contract that lists it, stay in one file, so an
upgrade of kernels is reviewed here and nowhere else.

Nothing here imports kernels or Torch at module import time.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from kernlock.environment import Target, system_platform

# ---------------------------------------------------------------- the contract


class Internal(NamedTuple):
    """A private name kernlock relies on: where it lives and what it must accept."""

    module: str
    name: str
    parameters: tuple[str, ...] = ()  # keyword parameters a callable must accept
    attributes: tuple[str, ...] = ()  # attributes a class or value must have

    @property
    def dotted(self) -> str:
        return f"{self.module}.{self.name}"


INTERNALS: tuple[Internal, ...] = (
    Internal("kernels.variants", "parse_variant"),
    Internal("kernels.variants", "resolve_variant", ("variants", "backend")),
    Internal("kernels.variants", "resolve_variants", ("variants", "backend")),
    Internal("kernels.variants", "_resolve_variant_for_system", (
        "variants", "selected_backend", "cpu", "os", "torch_version", "torch_cxx11_abi", "tvm_ffi_version", "macos_version",
    )),
    Internal("kernels.variants", "_METAL_MIN_MACOS_VERSION"),
    Internal("kernels.variants", "get_kernel_variants", ("repo_id", "revision", "version", "backend")),
    Internal("kernels.variants", "VariantAccepted", attributes=("variant",)),
    Internal("kernels.variants", "VariantRejected", attributes=("variant", "reason")),
    Internal("kernels.backends", "parse_backend"),
    Internal("kernels.backends", "_select_backend"),
    Internal("kernels._rust", "Metadata", attributes=("read_from_file", "from_bytes", "kernel_depends")),
    Internal("kernels._rust", "KernelDependency", attributes=("repo_id", "version")),
    Internal("kernels._rust", "KernelVersion", attributes=("Version", "Revision")),
    Internal("kernels._rust", "KernelLock", attributes=("commit",)),
    Internal("kernels._rust", "KernelLocks", attributes=("from_json", "to_json", "keys")),
    Internal("kernels.resolver", "LocalKernel", ("variant_path", "metadata", "origin")),
    Internal("kernels.resolver", "RemoteKernel", ("repo_id", "revision", "metadata", "variant")),
    Internal("kernels.resolver", "resolve_local_kernel", ("repo_path", "backend")),
    Internal("kernels.resolver", "SequentialResolver", attributes=("resolvers",)),
    Internal("kernels.resolver", "RepoPathsResolver", attributes=("local_kernels",)),
    Internal("kernels.importer", "_import_from_path", ("variant_path", "deps", "repo_info")),
    Internal("kernels.deps", "resolve_kernel_tree", ("api", "kernel", "backend", "resolver")),
    Internal("kernels.load", "_parse_local_kernel_overrides", ("local_kernels",)),  # mirrored by local_kernel_overrides
    Internal("kernels._versions", "select_revision_or_version", ("repo_id", "revision", "version", "local_files_only")),
    Internal("kernels.locking", "get_locked_kernel_revision", ("repo_id", "lockfile")),
    Internal("kernels.locking", "get_caller_locked_kernel_revision", ("repo_id",)),
    Internal("kernels.verify", "DEFAULT_POLICIES"),  # read by default_signers (0.19: kernels._internals.verify.DEFAULT_POLICY)
)

def _resolve(internal: Internal) -> Any:
    return getattr(importlib.import_module(internal.module), internal.name)


def _accepted_parameters(value: Any) -> set[str] | None:
    import inspect

    target = value.__init__ if inspect.isclass(value) else value
    try:
        return set(inspect.signature(target).parameters)
    except (TypeError, ValueError):  # compiled (Rust) callables have no signature
        return None


def check_internal(internal: Internal) -> str | None:
    """What changed about one internal (`kernels.x.name: ...`), or None when it still holds."""
    try:
        value = _resolve(internal)
    except (ImportError, AttributeError) as error:
        return f"{internal.dotted}: missing ({error})"
    accepted = _accepted_parameters(value) if internal.parameters else None
    if accepted is not None:
        lacking = [p for p in internal.parameters if p not in accepted]
        if lacking:
            return f"{internal.dotted}: no longer accepts {', '.join(lacking)}"
    fields = getattr(value, "__dataclass_fields__", {})
    lacking = [a for a in internal.attributes if not hasattr(value, a) and a not in fields]
    if lacking:
        return f"{internal.dotted}: has no {', '.join(lacking)}"
    return None


def broken_internals() -> list[str]:
    """One line per kernels internal that is missing or changed shape; empty when all hold."""
    return [problem for internal in INTERNALS if (problem := check_internal(internal)) is not None]


# ---------------------------------------------------------------- variants


class Decision(NamedTuple):
    """kernels' verdict on one build variant: accepted (ranked first to last) or rejected with a reason."""

    variant: str
    accepted: bool
    reason: str = ""


def _parsed(names: Iterable[str]) -> list[Any]:
    from kernels.variants import parse_variant

    parsed = []
    for name in names:
        try:
            parsed.append(parse_variant(name))
        except ValueError:
            continue  # kernels ignores variants it cannot parse
    return parsed


def _decisions(trace: list[Any]) -> list[Decision]:
    from kernels.variants import VariantAccepted

    return [
        Decision(d.variant.variant_str, True) if isinstance(d, VariantAccepted)
        else Decision(d.variant.variant_str, False, d.reason)
        for d in trace
    ]


def metal_min_macos() -> str:
    """The oldest macOS kernels loads Metal builds on."""
    from kernels.variants import _METAL_MIN_MACOS_VERSION

    return str(_METAL_MIN_MACOS_VERSION)


def system_parameters(target: Target) -> dict[str, Any]:
    """`target` as the keyword arguments of kernels' `_resolve_variant_for_system`.

    A Darwin target without a macOS version stands for a macOS new enough for
    kernels' Metal builds; a target without a tvm-ffi version has no tvm-ffi.
    """
    from kernels.backends import parse_backend
    from packaging.version import Version

    macos = target.macos or (metal_min_macos() if target.os == "darwin" else None)
    return {
        "selected_backend": parse_backend(target.backend),
        "cpu": target.cpu,
        "os": target.os,
        "torch_version": Version(target.torch_version),
        "torch_cxx11_abi": target.cxx11_abi,
        "tvm_ffi_version": Version(target.tvm_ffi) if target.tvm_ffi else None,
        "macos_version": Version(macos) if macos else None,
    }


def target_decisions(variant_names: Iterable[str], target: Target) -> list[Decision]:
    """kernels' ranked verdicts over `variant_names` for `target`: accepted first, best first."""
    from kernels.variants import _resolve_variant_for_system

    _, trace = _resolve_variant_for_system(variants=_parsed(variant_names), **system_parameters(target))
    return _decisions(trace)


def system_decisions(variant_names: Iterable[str], backend: str | None = None) -> list[Decision]:
    """kernels' ranked verdicts over `variant_names` for this machine (imports Torch)."""
    from kernels.variants import resolve_variants

    _, trace = resolve_variants(_parsed(variant_names), backend)
    return _decisions(trace)


def system_variant_trace(variant_names: Iterable[str], backend: str | None) -> list[Any]:
    """kernels' own decision objects for this machine (what `kernels.get_kernel_variants` returns)."""
    from kernels.variants import resolve_variants

    return resolve_variants(_parsed(variant_names), backend)[1]


def running_backend() -> str:
    """The backend kernels selects on this machine (`cpu`, `cu128`, …; imports Torch)."""
    from kernels.backends import _select_backend

    return _select_backend(None).variant_str


def kernels_target() -> Target:
    """The running environment exactly as kernels detects it (imports Torch)."""
    import re

    import torch

    cpu, os_name = system_platform()
    version = re.match(r"(\d+)\.(\d+)", torch.__version__)
    assert version is not None
    cxx11 = bool(torch.compiled_with_cxx11_abi()) if os_name == "linux" else None
    return Target(
        torch=(int(version.group(1)), int(version.group(2))),
        backend=running_backend(),
        cpu=cpu,
        os=os_name,
        cxx11_abi=cxx11,
    )


# ---------------------------------------------------------------- kernels' metadata, resolvers and loads


def variant_metadata(data: bytes) -> Any:
    """kernels' parsed `metadata.json` of a build variant."""
    from kernels import Metadata

    return Metadata.from_bytes(data)


def default_signers() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """kernels' curated signers, from its default signature policy: (GitHub repository, allowed build-signer URIs).

    kernels 0.17-0.18 keep them in `kernels.verify.DEFAULT_POLICIES` (a list), 0.19 in
    `kernels._internals.verify.DEFAULT_POLICY` (an `AnyOf`); each entry is a `GitHubWorkflowPolicy`
    with `repo_id` and `signer_uris`. Imports sigstore (through kernels): call it only to verify.
    """
    for name in ("kernels._internals.verify", "kernels.verify"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        policy = getattr(module, "DEFAULT_POLICY", None) or getattr(module, "DEFAULT_POLICIES")
        children = getattr(policy, "_children", policy)  # sigstore's AnyOf keeps its policies in _children
        return tuple((child.repo_id, tuple(child.signer_uris)) for child in children)
    raise ImportError("kernels has no verify module (kernels.verify or kernels._internals.verify)")


def kernel_request(kernel: Any) -> tuple[str, int | None, str | None]:
    """`(repo, version, revision)` of the `KernelDependency` kernels asks a resolver for."""
    return kernel.repo_id, getattr(kernel.version, "version", None), getattr(kernel.version, "revision", None)


def locked_kernel(root: Path, repo: str, commit: str, variant: str) -> Any:
    """kernels' `LocalKernel` for a verified variant directory, remembering its Hub origin."""
    from kernels._rust import Metadata
    from kernels.resolver import LocalKernel, RemoteKernel
    from kernels.variants import parse_variant

    metadata = Metadata.read_from_file(root / "metadata.json")
    origin = RemoteKernel(repo_id=repo, revision=commit, metadata=metadata, variant=parse_variant(variant))
    return LocalKernel(variant_path=root, metadata=metadata, origin=origin)


def local_path_kernel(path: Path, backend: str | None) -> Any:
    """kernels' `LocalKernel` for a local kernel directory (what `LOCAL_KERNELS` points at)."""
    from kernels.resolver import resolve_local_kernel

    return resolve_local_kernel(path, backend=backend)


def local_kernel_overrides(value: str | None) -> dict[str, Path]:
    """`LOCAL_KERNELS` (`repo=path:repo=path`) as kernels reads it; a bad value raises `ValueError`.

    Mirrors `kernels.load._parse_local_kernel_overrides` without importing kernels
    (so `kernlock verify` stays cheap); a contract test keeps the two in step.
    """
    overrides = {}
    for entry in (value or "").split(":") if value else []:
        if "=" not in entry:
            raise ValueError(f"Invalid LOCAL_KERNELS entry: {entry}. Expected format: repo_id_1=path_1:repo_id_2=path_2")
        repo, path = entry.split("=", 1)
        overrides[repo] = Path(path)
    return overrides


def locked_dependency(repo: str, commit: str) -> tuple[Any, Any]:
    """What kernels' lock readers return: `(KernelLocks, KernelDependency)` pinning `repo` to `commit`."""
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    dependency = KernelDependency(repo_id=repo, version=KernelVersion.Revision(commit))
    return KernelLocks(locks={dependency: KernelLock(commit=commit)}), dependency


def locks_commit(locks: Any, dependency: Any) -> str | None:
    """The commit a kernels `KernelLocks` records for `dependency`."""
    lock = locks.get(dependency, None)
    return lock.commit if lock is not None else None


# ---------------------------------------------------------------- kernels' JSON lock


class KernelsPin(NamedTuple):
    """One entry of kernels' JSON lock: a dependency (repo and version or revision) and its commit."""

    repo: str
    version: int | None
    revision: str | None
    commit: str


def parse_kernels_lock(text: str) -> list[KernelsPin]:
    """kernels' `KernelLocks` JSON as pins, in file order; raises `ValueError` if it is not one."""
    from kernels._rust import KernelLocks

    locks = KernelLocks.from_json(text)
    pins = []
    for dependency in locks.keys():
        repo, version, revision = kernel_request(dependency)
        pins.append(KernelsPin(repo, version, revision, locks.get(dependency).commit))
    return pins


def kernels_lock_json(pins: Iterable[KernelsPin]) -> str:
    """kernels' `KernelLocks` JSON for `pins`; the first pin of a dependency wins."""
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    locks = {}
    for pin in pins:
        version = KernelVersion.Version(pin.version) if pin.version is not None else KernelVersion.Revision(pin.revision)
        locks.setdefault(KernelDependency(repo_id=pin.repo, version=version), KernelLock(commit=pin.commit))
    return KernelLocks(locks=locks).to_json()


# ---------------------------------------------------------------- patching kernels' modules


class LockHooks(NamedTuple):
    """kernlock's answers to kernels, in kernlock's terms; each returns None to let kernels proceed as usual."""

    # (repo, version, revision, backend, the path `get_local_kernel` names for repo or None) -> a kernels kernel
    # location (from `locked_kernel`/`local_path_kernel`)
    resolve: Callable[[str, int | None, str | None, str | None, Path | None], Any]
    # (repo, where kernels was going to read its lock) -> the commit to load
    locked_commit: Callable[[str, str], str | None]
    # (repo, version, revision) -> commit, for layer and function repositories
    commit_for: Callable[[str, int | None, str | None], str | None]
    # (repo, version, revision) -> the build variant names at the commit to rank
    variants_for: Callable[[str, int | None, str | None], Iterable[str] | None]
    # wraps kernels' `_import_from_path(variant_path, deps, repo_info)`, which imports every variant
    wrap_import: Callable[[Callable[..., ModuleType]], Callable[..., ModuleType]]


class _LockedResolver:
    """A kernels resolver that asks the hooks first, then the chain the entry point built."""

    def __init__(self, hooks: LockHooks, inner: Any) -> None:
        self.hooks, self.inner = hooks, inner

    def resolve(self, *, api: Any, backend: str | None, kernel: Any) -> Any:
        located = self.hooks.resolve(*kernel_request(kernel), backend, _requested_path(self.inner, kernel.repo_id))
        if located is not None or self.inner is None:
            return located
        return self.inner.resolve(api=api, backend=backend, kernel=kernel)


def _requested_path(resolver: Any, repo: str) -> Path | None:
    """The path `get_local_kernel(path)` asks for as `repo`: its `RepoPathsResolver` in the chain names it."""
    from kernels.resolver import RepoPathsResolver, SequentialResolver

    if isinstance(resolver, SequentialResolver):
        return next((path for inner in resolver.resolvers if (path := _requested_path(inner, repo)) is not None), None)
    return resolver.local_kernels.get(repo) if isinstance(resolver, RepoPathsResolver) else None


def _patch_importer(module: ModuleType, hooks: LockHooks) -> None:
    replace_function(module, "_import_from_path", hooks.wrap_import)


def _patch_deps(module: ModuleType, hooks: LockHooks) -> None:
    # Every load (get_kernel, has_kernel, load_kernel, get_locked_kernel, layer and function
    # repositories, get_local_kernel, install_kernel) resolves its kernel tree here.
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def resolve_kernel_tree(api: Any, kernel: Any, backend: str | None, resolver: Any, seen: Any = None) -> Any:
            if not isinstance(resolver, _LockedResolver):
                resolver = _LockedResolver(hooks, resolver)
            return original(api=api, kernel=kernel, backend=backend, resolver=resolver, seen=seen)
        return resolve_kernel_tree

    replace_function(module, "resolve_kernel_tree", make)


def _patch_locking(module: ModuleType, hooks: LockHooks) -> None:
    # kernels' lock readers (load_kernel, get_locked_kernel, Locked*Repository).
    def served(repo: str, where: str) -> tuple[Any, Any] | None:
        commit = hooks.locked_commit(repo, where)
        return locked_dependency(repo, commit) if commit is not None else None

    def make_file(original: Callable[..., Any]) -> Callable[..., Any]:
        def get_locked_kernel_revision(repo_id: str, lockfile: Any) -> Any:
            return served(repo_id, f"kernels lock {lockfile}") or original(repo_id, lockfile)
        return get_locked_kernel_revision

    def make_caller(original: Callable[..., Any]) -> Callable[..., Any]:
        def get_caller_locked_kernel_revision(repo_id: str) -> Any:
            return served(repo_id, "kernels lock in package metadata") or original(repo_id)
        return get_caller_locked_kernel_revision

    replace_function(module, "get_locked_kernel_revision", make_file)
    replace_function(module, "get_caller_locked_kernel_revision", make_caller)


def _patch_versions(module: ModuleType, hooks: LockHooks) -> None:
    # Version -> commit lookups of layer and function repositories.
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def select_revision_or_version(repo_id: str, *, revision: str | None, version: int | None,
                                       local_files_only: bool) -> str:
            commit = hooks.commit_for(repo_id, version, revision)
            if commit is not None:
                return commit
            return original(repo_id, revision=revision, version=version, local_files_only=local_files_only)
        return select_revision_or_version

    replace_function(module, "select_revision_or_version", make)


def _patch_variants(module: ModuleType, hooks: LockHooks) -> None:
    # `get_kernel_variants`: kernels' own ranking over the variants the hooks name.
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def get_kernel_variants(repo_id: str, *, revision: str | None = None, version: int | None = None,
                                backend: str | None = None) -> Any:
            names = hooks.variants_for(repo_id, version, revision)
            if names is None:
                return original(repo_id, revision=revision, version=version, backend=backend)
            return system_variant_trace(names, backend)
        return get_kernel_variants

    replace_function(module, "get_kernel_variants", make)


# The kernels functions `kernlock.apply()` wraps, by the module that defines them.
PATCH_POINTS: dict[str, Callable[[ModuleType, LockHooks], None]] = {
    "kernels.importer": _patch_importer,
    "kernels.deps": _patch_deps,
    "kernels.locking": _patch_locking,
    "kernels._versions": _patch_versions,
    "kernels.variants": _patch_variants,
}


def patch_module(name: str, module: ModuleType, hooks: LockHooks) -> None:
    """Wrap the functions of kernels module `name` (a key of `PATCH_POINTS`) so they ask `hooks` first."""
    PATCH_POINTS[name](module, hooks)


def replace_function(module: ModuleType, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace `module.name` with `make(original)`, also where kernels modules imported it by name."""
    original = getattr(module, name)
    replacement = make(original)
    functools.update_wrapper(replacement, original)
    setattr(module, name, replacement)
    for other_name, other in list(sys.modules.items()):
        if (other_name == "kernels" or other_name.startswith("kernels.")) and getattr(other, name, None) is original:
            setattr(other, name, replacement)


def kernels_python_depends(kernels_root: Path) -> dict:
    """kernels' data file mapping `python-depends` names to pip packages and import names."""
    import json

    return json.loads((kernels_root / "python_depends.json").read_text())
