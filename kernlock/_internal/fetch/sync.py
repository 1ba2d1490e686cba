"""`kernlock sync`: put exactly the locked variants into the Hub cache, verified.

Only the files the lock lists are fetched, at the locked commit, into the
cache kernels reads (`KERNELS_CACHE`, `HF_HUB_CACHE`, `HF_HOME`). Files already
present are verified against the lock; `repair` re-downloads those that fail and removes
bytecode caches, but deletes nothing else from the shared cache: a file the lock does not
list may be a real part of the commit that plain kernels or another project relies on
(the lock lost it), so it is reported with the fix the Hub's listing of the commit calls for.
The lock registers itself, and each synced commit gets a GC root that `hf cache prune` keeps
(`kernlock._internal.store.cache_gc.keep`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kernlock._internal.fetch.download import Fetch, discard, download_variant
from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant, Lockfile
from kernlock._internal.project.groups import select_groups
from kernlock._internal.project.workspace import open_workspace
from kernlock._internal.rules.coverage import uncovered_problem
from kernlock._internal.spec.target import Target
from kernlock._internal.store.hub_cache import (
    check_variant,
    extra_files,
    hub_cache_dir,
    missing_files,
    remove_extra_files,
    unlisted_files_error,
    variant_dir,
)
from kernlock.errors import (
    IntegrityError,
    KernlockError,
    MissingFilesError,
    NoVariantError,
    UsageError,
    local_write_problem,
)


@dataclass
class SyncReport:
    """What `sync()` did, per variant."""

    cache: Path
    downloaded: list[str] = field(default_factory=list)  # "spec variant/path"
    repaired: list[str] = field(default_factory=list)
    verified: int = 0
    variants: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)  # entries a target does not load, and why
    unrooted: list[str] = field(default_factory=list)  # synced commits left without a GC root

    def to_dict(self) -> dict[str, object]:
        """The report as JSON (`kernlock sync --json`)."""
        return {
            "cache": str(self.cache),
            "variants": self.variants,
            "verified": self.verified,
            "bytes": self.bytes,
            "downloaded": self.downloaded,
            "repaired": self.repaired,
            "skipped": self.skipped,
            "unrooted": self.unrooted,
        }


def selected_variants(
    lock: Lockfile, targets: Iterable[Target]
) -> list[tuple[LockedKernel, LockedVariant]]:
    """The (kernel, variant) pairs locked for `targets` (from `Workspace.chosen_targets`).

    Each spec key's variant comes from the entry covering the target (an override's, or the spec's
    own); an entry that does not serve a target (another device type's, or native there) has none.
    """
    chosen = sorted(set(targets), key=str)
    pairs = []
    for spec in dict.fromkeys(kernel.spec for kernel in lock.kernels):
        for target in chosen:
            kernel = lock.kernel(spec, target)
            variant = kernel.variant_for(target) if kernel is not None else None
            if kernel is None or variant is None:
                default = lock.kernel(spec)
                assert default is not None  # spec is one of the lock's keys
                if not default.serves(target):  # loaded on other device types, or native here
                    continue
                message, fix = uncovered_problem(default, target)
                raise NoVariantError(message, fix=f"`{fix}`")
            pair = (kernel, variant)
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def sync_variant(
    kernel: LockedKernel,
    variant: LockedVariant,
    cache: Path,
    repair: bool,
    fetch: Fetch = download_variant,
) -> SyncReport:
    """Fetch one variant's missing files (from the Hub, or through `fetch`) and verify all of them
    (re-fetching bad ones with `repair`)."""
    report = SyncReport(cache=cache, variants=1, verified=len(variant.files))
    root = variant_dir(kernel, variant.name, cache)
    missing = missing_files(kernel, variant, root)
    just_verified = {}
    fetched: list[
        int
    ] = []  # bytes really transferred: a resumed download counts only what it added
    if missing:
        just_verified = fetch(kernel, variant, cache, missing, fetched=fetched)
        report.downloaded = [f"{kernel.spec} {variant.name}/{f.path}" for f in missing]
    if repair and (
        inert := sorted(
            set(extra_files(variant, root, bytecode=True)) - set(extra_files(variant, root))
        )
    ):
        # bytecode caches only: never part of a commit, never read by kernlock
        remove_extra_files(root, inert)
        report.repaired += [
            f"{kernel.spec} {variant.name}/{path} (removed: bytecode cache)" for path in inert
        ]
    try:
        check_variant(kernel, variant, root, just_verified=just_verified)
    except IntegrityError:
        if not repair:
            raise
        bad = [f for f in variant.files if _mismatched(root / f.path, f.sha256, f.size)]
        if bad:
            discard(kernel, variant.name, bad, cache)
            fetch(kernel, variant, cache, bad, force=True, fetched=fetched)
            report.repaired += [f"{kernel.spec} {variant.name}/{f.path}" for f in bad]
        # left in place: they may be part of the commit (see the error)
        if extra := extra_files(variant, root):
            held = _held_by_commit(kernel, variant, extra)
            # the lock is what is wrong: restore it first (what else is unlisted is named on the
            # next run)
            if held:
                raise unlisted_files_error(kernel, root, held, in_commit=True) from None
            raise unlisted_files_error(
                kernel, root, extra, in_commit=None if held is None else False
            ) from None
        check_variant(kernel, variant, root)
    report.bytes += sum(fetched)
    return report


def _held_by_commit(
    kernel: LockedKernel, variant: LockedVariant, extra: list[str]
) -> list[str] | None:
    """Which of `extra` (entries of a variant directory the lock does not list) the Hub lists at the
    locked commit; None when the Hub cannot say."""
    from kernlock._internal.hub.client import Hub

    try:
        listed = {f.path for f in Hub().tree(kernel.repo, kernel.commit)}
    except KernlockError:
        return None
    prefix = f"build/{variant.name}/"
    return [
        path
        for path in extra
        if (
            prefix + path in listed
            if not path.endswith("/")
            else any(p.startswith(prefix + path) for p in listed)
        )
    ]


def _mismatched(path: Path, sha256: str, size: int) -> bool:
    from kernlock._internal.store.hub_cache import sha256_file

    try:
        return path.stat().st_size != size or sha256_file(path) != sha256
    except FileNotFoundError:
        return True


def sync(
    project_dir: str | os.PathLike[str] = ".",
    *,
    targets: Iterable[str] = (),
    all_targets: bool = False,
    repair: bool = False,
    lockfile: str | os.PathLike[str] | None = None,
    locked: bool = False,
    progress: Callable[[int, int], None] | None = None,
    source: str | None = None,
    groups: Iterable[str] = (),
) -> SyncReport:
    """Download and verify the locked variants for `targets` (default: this environment).

    `locked` first requires the lock to be fresh against the project's sources. `source` (default
    `$KERNLOCK_MIRROR`) is an OCI location to fetch from instead of the Hub (`fetch.oci_pull`).
    `groups` syncs only the ungrouped entries and those of these `[tool.kernlock.groups]`.
    """
    workspace = open_workspace(project_dir, lockfile)
    path, lock = workspace.lock_path, workspace.read_lock()
    if locked:
        from kernlock._internal.rules.freshness import require_fresh

        require_fresh(workspace, lock)
    lock = select_groups(lock, groups, "sync")
    chosen = workspace.chosen_targets(lock, targets, all_targets)
    fetch = _mirror(source, lock)
    report = sync_variants(
        path, selected_variants(lock, chosen), repair=repair, progress=progress, fetch=fetch
    )
    report.skipped = skipped_entries(lock, chosen)
    return report


def _mirror(source: str | None, lock: Lockfile) -> Fetch:
    """What `sync` fetches through: the OCI location `source` (or `$KERNLOCK_MIRROR`), else the
    Hub."""
    from kernlock._internal import settings

    source = source or settings.text(settings.MIRROR_ENV)
    if not source:
        return download_variant
    from kernlock._internal.fetch.oci_pull import MirrorFetch

    return MirrorFetch(source, lock)


def skipped_entries(lock: Lockfile, targets: Iterable[Target]) -> list[str]:
    """Why each entry a chosen target does not load has no variant there: another device type's
    (`on cuda only`), or recorded native."""
    skipped = []
    for kernel in lock.kernels:
        for target in sorted(set(targets), key=str):
            if kernel.serves(target) or kernel.variant_for(target) is not None:
                continue
            native = kernel.native_reason(target)
            why = (
                f"native there: {native}"
                if native
                else f"loaded on {', '.join(kernel.devices)} only"
            )
            skipped.append(f"{kernel.spec} on {target}: skipped ({why})")
    return skipped


def sync_variants(
    path: Path,
    pairs: list[tuple[LockedKernel, LockedVariant]],
    *,
    repair: bool = False,
    progress: Callable[[int, int], None] | None = None,
    fetch: Fetch = download_variant,
) -> SyncReport:
    """The core of `sync()` (and of `vendor()`): download (through `fetch`) and verify `pairs`
    (from `selected_variants`) of the lock at `path` into the Hub cache."""
    if not pairs:
        raise UsageError(f"{path} locks no kernels", fix="run `kernlock lock` first")
    cache = hub_cache_dir()
    report = SyncReport(cache=cache)
    lock = _register(path)  # first: a `kernlock cache prune` meanwhile keeps what the lock names
    done = 0
    with ThreadPoolExecutor(max_workers=min(8, len(pairs))) as pool:
        futures = [pool.submit(sync_variant, k, v, cache, repair, fetch) for k, v in pairs]
        for future in futures:
            try:
                part = future.result()
            except KernlockError:
                raise
            except Exception as error:
                local = local_write_problem(error, cache)
                if local is not None:
                    raise MissingFilesError(
                        f"cannot store the locked files: {local[0]}", fix=local[1]
                    ) from None
                raise MissingFilesError(
                    f"cannot download locked files ({type(error).__name__}: "
                    f"{str(error).splitlines()[0] if str(error) else ''})",
                    fix="check HF_ENDPOINT, your network and HF_TOKEN, then re-run `kernlock sync`",
                ) from None
            report.downloaded += part.downloaded
            report.repaired += part.repaired
            report.verified += part.verified
            report.variants += part.variants
            report.bytes += part.bytes
            done += 1
            if progress:
                progress(done, len(pairs))
    from kernlock._internal.store.cache_gc import keep

    report.unrooted = keep(path, lock, cache, [(k.repo, k.commit) for k, _ in pairs])
    return report


def _register(path: Path) -> Lockfile:
    """The lock at `path`, registered (`kernlock cache`)."""
    from kernlock._internal.lockfile.serialize import load_lockfile
    from kernlock._internal.store.registry import register

    lock = load_lockfile(path)
    register(path, lock)
    return lock
