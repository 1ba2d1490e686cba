"""The loader patch: `kernlock.apply()` binds every kernel load to `kernels.lock`.

Every kernels entry point (`get_kernel`, `has_kernel`, `load_kernel`,
`get_locked_kernel`, `get_local_kernel`, layer and function repositories and
their locked forms, `kernelize`, Transformers' `attn_implementation` and
`use_kernels`) asks kernlock first through the hooks `compat.kernels_api` installs:
a locked repo resolves to the locked commit and variant in the verified cache
with no Hub request; a local kernel follows `kernlock._internal.project.local_kernels`; anything
else is refused (strict) or left to kernels with a warning. If kernels is not
imported yet, the patch waits for its import (an import hook), so `apply()`
works before or after Transformers and kernels are imported.

Every way a kernel load is bound, checked or refused under the lock (the coverage
and compatibility checks, the local-kernel policy, the hooks handed to kernels and
the import hook) is in this file, which entry a request binds to in `entries`, and the build a
locked entry binds to in `locked_build`, so what could load unchecked is audited in three reads.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import logging
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kernlock._internal.compat.kernels_api import kernels_target, local_path_kernel
from kernlock._internal.compat.kernels_patch import LockHooks, patch_module, patch_points
from kernlock._internal.host import current_target
from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.project import local_kernels
from kernlock._internal.project.groups import applied_groups, other_group
from kernlock._internal.project.strict import lenient_hint
from kernlock._internal.project.workspace import applied_workspace
from kernlock._internal.runtime import state
from kernlock._internal.runtime.entries import find_entry, holds
from kernlock._internal.runtime.gpu_arch import check_served, require_device_archs
from kernlock._internal.runtime.importguard import guard_import, is_verified, zip_spec
from kernlock._internal.runtime.layer_record import layer_table, native_by_lock
from kernlock._internal.runtime.locked_build import backend_target, load_locked_build
from kernlock._internal.runtime.notices import log_to_stderr, note_once, warn_once
from kernlock._internal.runtime.rank_hook import check_initialised, patch_c10d
from kernlock._internal.runtime.state import BOOK, Binding
from kernlock._internal.settings import TARGET_ENV, strict_from_env, text
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import LocalKernelError, UnlockedKernelError

logger = logging.getLogger("kernlock")


@dataclass(frozen=True)
class Applied:
    """What `apply()` bound: for logs and tests."""

    lock_path: Path
    target: str
    strict: bool
    kernels: dict[str, tuple[str, str]] = field(default_factory=dict)  # spec -> (commit, variant)

    def __str__(self) -> str:
        pins = ", ".join(
            f"{spec}@{commit[:12]} [{variant}]"
            for spec, (commit, variant) in sorted(self.kernels.items())
        )
        return (
            f"kernlock: {self.lock_path} applied for {self.target} "
            f"({'strict' if self.strict else 'lenient'}): {pins}"
        )


# ---------------------------------------------------------------- the checker


def _environment(simulated: str | None = None) -> Target:
    """The running environment; exact when Torch is already imported, else from metadata.

    `simulated` (or `$KERNLOCK_TARGET`) stands in for detection: kernlock then
    binds loads as it would on that target, using kernels' ranking for it.
    """
    simulated = simulated or text(TARGET_ENV)
    if simulated:
        return parse_target(simulated)
    if "torch" in sys.modules and "kernels" in sys.modules:
        return kernels_target()
    return current_target()


# ---------------------------------------------------------------- binding requests to entries


def _unlocked(
    bound: Binding, repo: str, what: str, version: int | None = None, revision: str | None = None
) -> None:
    spec = (
        f"{repo}@v{version}" if version is not None else f"{repo}@{revision}" if revision else repo
    )
    from kernlock._internal.runtime.default_kernels import NotLockedDefaultKernel, default_kernelize

    default = default_kernelize()
    native = native_by_lock(bound, repo, spec)
    if native is not None:  # the lock says so: no build for this target
        raise NotLockedDefaultKernel(native)
    if default is not None and (repo, version, revision) in default.requests:
        model = default.model or "<your model directory>"
        message = (
            f"kernlock: Transformers kernelizes {default.model or 'a model'} with {spec} by "
            f"default, and {bound.path} does not hold it: its layers keep Transformers' own "
            f"forward; fix: `kernlock lock --model {model}` locks what the model loads"
        )
        with BOOK.mutex:
            BOOK.native[repo] = f"not in {bound.path}"
        note_once(f"default:{spec}", message)
        # kernels' KernelizeFallback.ALL keeps the original forward
        raise NotLockedDefaultKernel(message)
    where = (bound.path, bound.groups, bound.elsewhere)
    error = other_group(repo, what, *where) or UnlockedKernelError(
        f"kernel {repo} ({what}) is not in {bound.path}",
        fix=f"lock it with `kernlock lock {spec}` ({lenient_hint()})",
    )
    if bound.strict:
        raise error
    warn_once(f"unlocked:{repo}:{what}", str(error))


# ---------------------------------------------------------------- local kernels


def _local_kernel(bound: Binding, repo: str, path: Path, how: str) -> None:
    """Apply the local-kernel policy: refuse under strict mode unless allowed, else warn loudly
    once."""
    commits = sorted({e.commit[:12] for e in bound.lock.for_repo(repo)})
    instead = f"instead of the locked {', '.join(commits)}" if commits else "(not in the lock)"
    if bound.strict and not local_kernels.allowed():
        problem, fix = local_kernels.refusal(f"{how} loads {repo} from {path} {instead}")
        raise LocalKernelError(problem, fix=fix)
    warn_once(
        f"local:{repo}:{path}",
        f"kernlock: {how}: loading {repo} from {path} {instead}; its files are not checked against "
        f"{bound.path}",
    )


# ---------------------------------------------------------------- the lock-backed resolver


def _describe(version: int | None, revision: str | None) -> str:
    return f"version {version}" if version is not None else f"revision {revision}"


def _resolve_load(
    repo: str,
    version: int | None,
    revision: str | None,
    backend: str | None,
    requested_path: Path | None,
) -> Any:
    """The locked build of a locked repo, a permitted local kernel, or None (refused first when
    strict).

    Only `LOCAL_KERNELS` and `get_local_kernel(path)` (`requested_path`) are local:
    a directory that happens to be named like a repo is not.
    """
    bound = state.binding()
    if bound is None:
        return None
    override = local_kernels.overrides().get(repo)
    if override is not None:
        _local_kernel(bound, repo, override, "LOCAL_KERNELS")
        return local_path_kernel(override, backend)
    if requested_path is not None and not bound.lock.for_repo(repo):
        _local_kernel(bound, repo, requested_path, "get_local_kernel")
        return local_path_kernel(requested_path, backend)
    entry = find_entry(bound.lock, repo, version, revision, bound.target)
    if entry is None:
        _unlocked(bound, repo, _describe(version, revision), version, revision)
        return None
    target = backend_target(bound, entry, backend)
    local = load_locked_build(bound, entry, target, backend)
    variant = entry.variant_for(target)
    assert variant is not None  # locked_local_kernel refuses a target without one
    logger.info(
        "kernlock: %s (%s) -> %s [%s]",
        repo,
        _describe(version, revision),
        entry.commit,
        variant.name,
    )
    with BOOK.mutex:
        if (entry.repo, entry.commit, variant.name) not in BOOK.loaded:
            from kernlock._internal.lockfile.run_record import loaded_entry

            BOOK.loaded[(entry.repo, entry.commit, variant.name)] = loaded_entry(entry, variant)
    return local


def _locked_commit(repo: str, where: str) -> str | None:
    """The commit kernels' lock readers get for `repo`: the applied lock's entry, whatever `where`
    holds."""
    bound = state.binding()
    if bound is None:
        return None
    entries = [e for e in bound.lock.for_repo(repo) if e.variant_for(bound.target) is not None]
    if not entries:
        _unlocked(bound, repo, where)
        return None
    entry = next((e for e in entries if e.spec in e.names()), None) or next(
        (e for e in entries if e.requested), entries[0]
    )
    return entry.commit


def _locked_entry(repo: str, version: int | None, revision: str | None) -> LockedKernel | None:
    """The entry a version lookup binds to; refuses (strict) or warns about an unlocked one."""
    bound = state.binding()
    entry = find_entry(bound.lock, repo, version, revision, bound.target) if bound else None
    if entry is None and bound is not None and repo not in local_kernels.overrides():
        _unlocked(bound, repo, _describe(version, revision), version, revision)
    return entry


def _commit_for(repo: str, version: int | None, revision: str | None) -> str | None:
    entry = _locked_entry(repo, version, revision)
    return entry.commit if entry is not None else None


def _variants_for(repo: str, version: int | None, revision: str | None) -> tuple[str, ...] | None:
    entry = _locked_entry(repo, version, revision)
    return entry.build_variants if entry is not None else None


def _verified_under_lock(variant_path: Path) -> bool:
    """Whether a lock is applied and kernlock verified `variant_path` against it (kernels'
    validators step aside)."""
    return state.binding() is not None and is_verified(variant_path)


_HOOKS = LockHooks(
    resolve=_resolve_load,
    locked_commit=_locked_commit,
    commit_for=_commit_for,
    variants_for=_variants_for,
    wrap_import=guard_import,
    verified=_verified_under_lock,
    check_arch=check_served,
    zip_spec=zip_spec,
    locked_repo=lambda repo: (bound := state.binding()) is not None and holds(bound, repo),
)


def _patch_trainer(module: ModuleType) -> None:
    from kernlock._internal.runtime.trainer_record import patch_trainer

    patch_trainer(module, loaded)


def _patch_modeling_utils(module: ModuleType) -> None:
    from kernlock._internal.runtime.default_kernels import patch_modeling_utils

    patch_modeling_utils(module)


# Modules patched when (or as soon as) they are imported: kernels' (through the adapter),
# torch.distributed's and Transformers' modeling_utils.
_PATCHERS: dict[str, Callable[[ModuleType], None]] = {
    name: functools.partial(patch_module, name, hooks=_HOOKS) for name in patch_points()
}
# the cross-rank guard (kernlock._internal.runtime.rank_hook)
_PATCHERS["torch.distributed.distributed_c10d"] = patch_c10d
# its default kernelize (runtime.default_kernels)
_PATCHERS["transformers.modeling_utils"] = _patch_modeling_utils
# the run record in checkpoints (runtime.trainer_record)
_PATCHERS["transformers.trainer"] = _patch_trainer


def _patch_module(name: str, module: ModuleType) -> None:
    with BOOK.mutex:
        if name in BOOK.patched:
            return
        BOOK.patched.add(name)
    _PATCHERS[name](module)


class _KernelsImportHook(importlib.abc.MetaPathFinder):
    """Patches kernels' modules the moment they are first imported."""

    def find_spec(self, fullname: str, path: Any, target: Any = None):
        if fullname not in _PATCHERS or fullname in BOOK.patched:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original_exec(module)
            _patch_module(fullname, module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _ensure_patched() -> None:
    """Patch kernels now where it is imported, and on import otherwise."""
    for name in _PATCHERS:
        module = sys.modules.get(name)
        if module is not None:
            _patch_module(name, module)
    if not all(name in BOOK.patched for name in _PATCHERS) and not any(
        isinstance(finder, _KernelsImportHook) for finder in sys.meta_path
    ):
        sys.meta_path.insert(0, _KernelsImportHook())


# ---------------------------------------------------------------- public


def apply(
    lockfile: str | os.PathLike[str] | None = None,
    *,
    strict: bool | None = None,
    target: str | None = None,
    locked: bool = False,
    group: str | Iterable[str] | None = None,
) -> Applied:
    """Bind every kernel load in this process to the lock; fail early if it cannot cover this
    environment.

    `target` (or `$KERNLOCK_TARGET`) simulates another environment instead of
    detecting this one. `locked` also requires the lock to be fresh against the
    project's sources (like `cargo --locked`). `group` (or `$KERNLOCK_GROUPS`) binds only the
    ungrouped entries and those of these `[tool.kernlock.groups]`. Idempotent: calling it again
    re-reads the lock and re-checks the environment.
    """
    log_to_stderr()
    workspace = applied_workspace(lockfile)
    lock = workspace.read_lock()
    path = workspace.lock_path.resolve()
    if workspace.discovered and workspace.has_sources:  # a named lock is trusted by naming it
        from kernlock._internal.rules.freshness import require_trusted

        require_trusted(workspace, lock)
    if locked:
        from kernlock._internal.rules.freshness import require_fresh

        require_fresh(workspace, lock)
    lock, groups, elsewhere = applied_groups(lock, group)
    if strict is None:
        strict = strict_from_env()
    simulated = target or text(TARGET_ENV)
    environment = _environment(simulated)
    from kernlock._internal.rules.coverage import require_coverage
    from kernlock._internal.rules.doctor import require_compatible

    require_coverage(lock, environment, path)
    if target is None and simulated:
        from kernlock._internal.rules.coverage import simulated_target_note

        if (note := simulated_target_note()) is not None:
            note_once(note, f"kernlock: warning: {note}")
    for finding in require_compatible(lock, environment):
        warn_once(finding.message, f"{finding.message}; fix: {finding.fix}")
    require_device_archs(lock, environment)  # only where Torch already initialised the GPU
    overrides = local_kernels.overrides()
    if overrides and strict and not local_kernels.allowed():
        listed = ", ".join(f"{repo}={local}" for repo, local in sorted(overrides.items()))
        problem, fix = local_kernels.refusal(f"LOCAL_KERNELS overrides {listed}")
        raise LocalKernelError(problem, fix=fix)
    bound = Binding(
        lock=lock,
        path=path,
        target=environment,
        strict=strict,
        simulated=bool(simulated),
        lock_sha256=_file_sha256(path),
        groups=groups,
        elsewhere=elsewhere,
    )
    with BOOK.mutex:
        state.bind(bound)
        BOOK.loaded = {}
        BOOK.native = {}
        BOOK.layers = {}
    for repo, local in sorted(overrides.items()):
        _local_kernel(bound, repo, local, "LOCAL_KERNELS")
    _ensure_patched()
    check_initialised()
    applied = Applied(
        lock_path=path,
        target=str(environment),
        strict=strict,
        kernels={
            k.spec: (k.commit, variant.name)
            for k in lock.kernels
            if (variant := k.variant_for(environment)) is not None
        },
    )
    logger.info("%s", applied)
    return applied


def _file_sha256(path: Path) -> str | None:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def loaded() -> dict[str, Any] | None:
    """What this process loaded under the lock so far (the run record, `kernlock.json`'s content);
    None unapplied."""
    from kernlock._internal.lockfile.run_record import RECORD_FORMAT

    with BOOK.mutex:
        bound = state.binding()
        if bound is None:
            return None
        return {
            "format": RECORD_FORMAT,
            "lockfile": str(bound.path),
            "lock-sha256": bound.lock_sha256,
            "target": str(bound.target),
            "kernels": [dict(e) for _, e in sorted(BOOK.loaded.items())],
            "layers": layer_table(),
        }


def active_lock() -> Lockfile | None:
    """The lock applied in this process, if any."""
    bound = state.binding()
    return bound.lock if bound is not None else None


def release() -> None:
    """Stop binding loads to a lock in this process (the patch stays installed, inert)."""
    with BOOK.mutex:
        state.bind(None)
        BOOK.warned.clear()
        BOOK.loaded = {}
        BOOK.native = {}
        BOOK.layers = {}
