"""Patching kernels' modules: `kernlock.apply()`'s hooks (`LockHooks`) wrapped around kernels'
loaders, resolvers, lock readers, variant ranking and load-time validators, per kernels line
(`patch_points`; kernels 0.16's single loader module: `_patch_utils`)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from kernlock._internal.compat.kernels_api import (
    kernel_request,
    kernels_module,
    line,
    locked_dependency,
    module_name,
    system_variant_trace,
)


class LockHooks(NamedTuple):
    """kernlock's answers to kernels, in kernlock's terms; each returns None to let kernels proceed
    as usual."""

    # (repo, version, revision, backend, the path `get_local_kernel` names for repo or None) -> a
    # kernels kernel location (from `locked_kernel`/`local_path_kernel`)
    resolve: Callable[[str, int | None, str | None, str | None, Path | None], Any]
    # (repo, where kernels was going to read its lock) -> the commit to load
    locked_commit: Callable[[str, str], str | None]
    # (repo, version, revision) -> commit, for layer and function repositories (kernels 0.17)
    commit_for: Callable[[str, int | None, str | None], str | None]
    # (repo, version, revision) -> the build variant names at the commit to rank
    variants_for: Callable[[str, int | None, str | None], Iterable[str] | None]
    # wraps kernels' `_import_from_path(variant_path, deps, repo_info)`, which imports every variant
    wrap_import: Callable[[Callable[..., ModuleType]], Callable[..., ModuleType]]
    # variant path -> whether kernlock verified it against the lock (kernels 0.18+ validators then
    # step aside)
    verified: Callable[[Path], bool]
    # (parsed metadata.json, variant name) -> None, or raises kernlock's one-line refusal, before
    # kernels' `ArchValidator` checks the same build against this device (only where kernels checks:
    # `check_arch=True`)
    check_arch: Callable[[Any, str], None] = lambda metadata, variant: None
    # (kernels' spec of a "zip"-layout variant, variant path, archive path) -> the spec to import
    # (kernels 0.19)
    zip_spec: Callable[[Any, Path, str], Any] = lambda spec, variant_path, archive: spec
    # repo -> whether the applied lock holds it for this target (kernels 0.16 asks the Hub whether
    # its publisher is trusted on every load; for a locked repo the lock recorded that at lock time)
    locked_repo: Callable[[str], bool] = lambda repo: False


class _LockedResolver:
    """A kernels resolver that asks the hooks first, then the chain the entry point built."""

    def __init__(self, hooks: LockHooks, inner: Any) -> None:
        self.hooks, self.inner = hooks, inner

    def resolve(self, *, api: Any, backend: str | None, kernel: Any) -> Any:
        located = self.hooks.resolve(
            *kernel_request(kernel), backend, _requested_path(self.inner, kernel.repo_id)
        )
        if located is not None or self.inner is None:
            return located
        return self.inner.resolve(api=api, backend=backend, kernel=kernel)


def _requested_path(resolver: Any, repo: str) -> Path | None:
    """The path `get_local_kernel(path)` asks for as `repo`: its `RepoPathsResolver` in the chain
    names it."""
    resolvers = kernels_module("resolver")
    if isinstance(resolver, resolvers.SequentialResolver):
        return next(
            (
                path
                for inner in resolver.resolvers
                if (path := _requested_path(inner, repo)) is not None
            ),
            None,
        )
    return (
        resolver.local_kernels.get(repo)
        if isinstance(resolver, resolvers.RepoPathsResolver)
        else None
    )


def _patch_importer(module: ModuleType, hooks: LockHooks) -> None:
    replace_function(module, "_import_from_path", hooks.wrap_import)
    if hasattr(module, "_zip_spec"):  # kernels 0.19: the "zip" build layout

        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def _zip_spec(variant_path: Path, metadata: Any) -> Any:
                spec = original(variant_path, metadata)
                return hooks.zip_spec(
                    spec, variant_path, str(Path(variant_path) / f"{metadata.id}.zip")
                )

            return _zip_spec

        replace_function(module, "_zip_spec", make)


def _patch_deps(module: ModuleType, hooks: LockHooks) -> None:
    # Every load (get_kernel, has_kernel, load_kernel, get_locked_kernel, layer and function
    # repositories, get_local_kernel, install_kernel) resolves its kernel tree here.
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def resolve_kernel_tree(
            api: Any, kernel: Any, backend: str | None, resolver: Any, seen: Any = None
        ) -> Any:
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
        # kernels 0.17 also passes `local_files_only`; 0.16 does not
        def select_revision_or_version(
            repo_id: str, *, revision: str | None, version: int | None, **options: Any
        ) -> str:
            commit = hooks.commit_for(repo_id, version, revision)
            if commit is not None:
                return commit
            return original(repo_id, revision=revision, version=version, **options)

        return select_revision_or_version

    replace_function(module, "select_revision_or_version", make)


def _patch_variants(module: ModuleType, hooks: LockHooks) -> None:
    # `get_kernel_variants`: kernels' own ranking over the variants the hooks name.
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def get_kernel_variants(
            repo_id: str,
            *,
            revision: str | None = None,
            version: int | None = None,
            backend: str | None = None,
        ) -> Any:
            names = hooks.variants_for(repo_id, version, revision)
            if names is None:
                return original(repo_id, revision=revision, version=version, backend=backend)
            return system_variant_trace(names, backend)

        return get_kernel_variants

    replace_function(module, "get_kernel_variants", make)


def _patch_validators(module: ModuleType, hooks: LockHooks) -> None:
    # kernels' ArchValidator (every line; `check_arch=True`): kernlock refuses a build it served
    # that does not
    # support this device with its own one line first, then kernels checks as usual (a RuntimeError
    # either way).
    arch = module.ArchValidator
    arch_original = arch.validate_metadata

    def validate_metadata(
        self: Any, *, metadata: Any, variant: str, _original: Callable[..., None] = arch_original
    ) -> None:
        hooks.check_arch(metadata, variant)
        _original(self, metadata=metadata, variant=variant)

    functools.update_wrapper(validate_metadata, arch_original)
    arch.validate_metadata = validate_metadata
    if line().VALIDATORS is None:  # kernels 0.17: no kernel validators
        return
    # kernels 0.18+ checks every loaded variant: its files against the metadata digest (keeping a
    # receipt in the kernels cache) and its Sigstore bundle (refreshing TUF online). For a variant
    # kernlock verified, kernlock has checked the same offline from the lock (`kernlock.integrity`),
    # so these step aside; every other load (local kernels, lenient unlocked loads) keeps them.
    for name in ("DigestValidator", "SignatureValidator"):
        validator = getattr(module, name)
        original = validator.validate_kernel

        def validate_kernel(
            self: Any, *, kernel: Any, _original: Callable[..., None] = original
        ) -> None:
            if not hooks.verified(kernel.variant_path):
                _original(self, kernel=kernel)

        functools.update_wrapper(validate_kernel, original)
        validator.validate_kernel = validate_kernel


# the count is its seven small wrappers', each a closure over `hooks`, not one function's branching
def _patch_utils(module: ModuleType, hooks: LockHooks) -> None:  # noqa: C901
    """kernels 0.16's `utils`, where every load downloads (`install_kernel`), checks the device
    (`_check_arch_incompatibility`) and imports (`_import_from_path`)."""

    def make_install(original: Callable[..., Any]) -> Callable[..., Any]:
        # get_kernel, get_locked_kernel and layer/function repositories call it with the commit
        # `select_revision_or_version` (patched) gave them
        def install_kernel(repo_id: str, *, revision: str, **options: Any) -> Path:
            located = hooks.resolve(repo_id, None, revision, options.get("backend"), None)
            if located is not None:
                return Path(located.variant_path)
            return original(repo_id, revision=revision, **options)

        return install_kernel

    def make_local(original: Callable[..., Path]) -> Callable[..., Path]:
        # load_kernel's offline read of kernels' own cache
        def _resolve_local_variant_path(api: Any, repo_id: str, *, revision: str, **options: Any):
            located = hooks.resolve(repo_id, None, revision, options.get("backend"), None)
            if located is not None:
                return Path(located.variant_path)
            return original(api, repo_id, revision=revision, **options)

        return _resolve_local_variant_path

    def make_trust(original: Callable[..., None]) -> Callable[..., None]:
        def _check_trust_remote_code(repo_id: str, trust_remote_code: Any) -> None:
            if not hooks.locked_repo(repo_id):
                original(repo_id, trust_remote_code)

        return _check_trust_remote_code

    def make_has(original: Callable[..., bool]) -> Callable[..., bool]:
        def has_kernel(
            repo_id: str,
            revision: str | None = None,
            version: int | None = None,
            backend: str | None = None,
            check_arch: bool = True,
        ) -> bool:
            commit = hooks.commit_for(repo_id, version, revision)
            if commit is None:
                return original(repo_id, revision, version, backend, check_arch)
            located = hooks.resolve(repo_id, None, commit, backend, None)
            if located is None:
                return False
            if check_arch:
                hooks.check_arch(located.metadata, Path(located.variant_path).name)
            return True

        return has_kernel

    def make_arch(original: Callable[..., None]) -> Callable[..., None]:
        def _check_arch_incompatibility(metadata: Any, variant: str) -> None:
            hooks.check_arch(metadata, variant)
            original(metadata, variant)

        return _check_arch_incompatibility

    def make_file(original: Callable[..., str | None]) -> Callable[..., str | None]:
        def _get_locked_kernel(repo_id: str, lock_json: str) -> str | None:
            return hooks.locked_commit(repo_id, "kernels lock") or original(repo_id, lock_json)

        return _get_locked_kernel

    def make_caller(original: Callable[..., str | None]) -> Callable[..., str | None]:
        def _get_caller_locked_kernel(repo_id: str) -> str | None:
            return hooks.locked_commit(repo_id, "kernels lock in package metadata") or original(
                repo_id
            )

        return _get_caller_locked_kernel

    replace_function(module, "install_kernel", make_install)
    replace_function(module, "_resolve_local_variant_path", make_local)
    replace_function(module, "_check_trust_remote_code", make_trust)
    replace_function(module, "has_kernel", make_has)
    replace_function(module, "_check_arch_incompatibility", make_arch)
    replace_function(module, "_get_locked_kernel", make_file)
    replace_function(module, "_get_caller_locked_kernel", make_caller)
    replace_function(module, "_import_from_path", hooks.wrap_import)
    _patch_variants(module, hooks)


def patch_points() -> dict[str, Callable[[ModuleType, LockHooks], None]]:
    """The kernels modules `kernlock.apply()` wraps, by full name, for the installed kernels
    line."""
    kernels_line = line()
    if not kernels_line.RESOLVER_CHAIN:  # kernels 0.16
        assert kernels_line.REVISION_LOOKUP is not None
        return {
            module_name("utils"): _patch_utils,
            module_name(kernels_line.REVISION_LOOKUP[0]): _patch_versions,
        }
    points: dict[str, Callable[[ModuleType, LockHooks], None]] = {
        module_name("importer"): _patch_importer,
        module_name("deps"): _patch_deps,
        module_name("locking"): _patch_locking,
        module_name("variants"): _patch_variants,
    }
    if kernels_line.REVISION_LOOKUP is not None:
        points[module_name(kernels_line.REVISION_LOOKUP[0])] = _patch_versions
    points[module_name("validate")] = (
        _patch_validators  # ArchValidator on every line; 0.18+: Digest and Signature too
    )
    return points


def patch_module(name: str, module: ModuleType, hooks: LockHooks) -> None:
    """Wrap the functions of kernels module `name` (a key of `patch_points()`) so they ask `hooks`
    first."""
    patch_points()[name](module, hooks)


def replace_function(
    module: ModuleType, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> None:
    """Replace `module.name` with `make(original)`, also where kernels modules imported it by
    name."""
    original = getattr(module, name)
    replacement = make(original)
    functools.update_wrapper(replacement, original)
    setattr(module, name, replacement)
    for other_name, other in list(sys.modules.items()):
        if (other_name == "kernels" or other_name.startswith("kernels.")) and getattr(
            other, name, None
        ) is original:
            setattr(other, name, replacement)
