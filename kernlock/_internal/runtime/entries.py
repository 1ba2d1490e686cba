"""Binding a kernels request (a repo and a version or revision) to the applied lock's entry."""

from __future__ import annotations

from kernlock._internal.host import current_target
from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.runtime.notices import warn_once
from kernlock._internal.runtime.state import Binding
from kernlock._internal.spec.target import Target


def holds(bound: Binding, repo: str) -> bool:
    """Whether the applied lock holds `repo` for the bound target."""
    return any(e.variant_for(bound.target) is not None for e in bound.lock.for_repo(repo))


def find_entry(
    lock: Lockfile,
    repo: str,
    version: int | None,
    revision: str | None,
    target: Target | None = None,
) -> LockedKernel | None:
    """The lock entry a kernels request (`repo`, version or revision) binds to.

    Only entries covering `target` count (overrides give one spec different
    entries per target); `repo` may be the canonical name or an alias.
    """
    from kernlock._internal.spec.kernel_spec import (
        looks_like_sha,  # not at the top: only loads need it, not apply()
    )

    entries = [
        e for e in lock.for_repo(repo) if target is None or e.variant_for(target) is not None
    ]
    names = {name for entry in entries for name in entry.names()} | {repo}
    if revision is not None:
        for entry in entries:
            if (
                revision in (entry.commit, entry.ref)
                or any(entry.spec == f"{name}@{revision}" for name in names)
                or (looks_like_sha(revision) and entry.commit.startswith(revision))
            ):
                return entry
        return None
    for entry in entries:
        if any(entry.spec == f"{name}@v{version}" for name in names):
            return entry
    for entry in entries:
        if entry.spec in names:
            if (
                version is not None
                and entry.version != version
                and not _transformers_default(repo, version, target)
            ):
                # `get_kernel(repo, version=N)` from code: another version than the bare spec's is
                # unlocked
                continue
            if entry.override is not None:
                warn_once(
                    f"override:{entry.spec}:{entry.override.when}",
                    f"{entry.spec}: override for {entry.override.when} loads {entry.override.use} "
                    f"({entry.commit[:12]}): {entry.override.reason}",
                )
            elif entry.version != version:
                warn_once(
                    f"default:{repo}",
                    f"{repo}: this Transformers release asks for version {version}; the lock pins "
                    f"the bare spec at version {entry.version} ({entry.commit[:12]}), which is "
                    "what loads",
                )
            return entry
    for entry in entries:
        if entry.version == version:
            return entry
    return None


def _transformers_default(repo: str, version: int, target: Target | None) -> bool:
    """Whether `version` is the one the installed Transformers asks for a bare `repo` (its default
    on the bound `target`, or on this machine's torch, which Transformers reads), so a lock pinning
    the bare spec at another version serves it, with the default-drift note."""
    from kernlock._internal.compat.transformers import (
        default_version,  # only on this rare path: it reads Transformers' source
    )

    for on in (lambda: target, current_target):
        try:
            where = on()
            if where is not None and default_version(repo, where)[0] == version:
                return True
        # no target, or a Transformers source it cannot read: not provably the default
        except Exception:
            continue
    return False
