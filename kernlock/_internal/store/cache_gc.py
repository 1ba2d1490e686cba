"""`kernlock cache`: what the registered locks keep in the Hub cache, and freeing what none needs.

`keep` is what `sync`, `vendor` and `apply()`'s own downloads call: the lock registers itself
(`kernlock._internal.store.registry`) and leaves a root per synced commit
(`kernlock._internal.store.gc_roots`), so `hf cache prune` keeps them. `prune` frees the commits
kernlock rooted that no registered lock names now: their stale roots go, and a commit no other ref
points at (`refs/main`, kernels' `refs/v4`, a user's ref, another lock's root) is deleted by
huggingface_hub's own deletion (`HFCacheInfo.delete_revisions`), which keeps every blob another
cached revision links: files are shared by content, so a file another lock lists stays.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.store.gc_roots import (
    Root,
    add_root,
    other_refs,
    remove_root,
    repo_of,
    root_for,
    roots,
    snapshot_present,
    snapshot_size,
)
from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder
from kernlock._internal.store.registry import Registration, register, registrations
from kernlock.errors import KernlockError, UsageError

if TYPE_CHECKING:
    from huggingface_hub import CachedRevisionInfo


def keep(
    lock_path: Path, lock: Lockfile, cache: Path, synced: Iterable[tuple[str, str]]
) -> list[str]:
    """Register the lock and root each synced (repo, commit) in `cache`; what could not be rooted
    (one line each: a read-only cache keeps the files, and `hf cache prune` may delete them)."""
    identity = register(lock_path, lock, cache)
    problems = []
    for repo, commit in dict.fromkeys(synced):
        try:
            add_root(cache, root_for(repo, commit, identity))
        except (OSError, KernlockError) as error:
            problems.append(f"{repo}@{commit[:12]}: no GC root written in {cache} ({_why(error)})")
    return problems


def _why(error: OSError | KernlockError) -> str:
    return error.message if isinstance(error, KernlockError) else str(error.strerror or error)


@dataclass(frozen=True)
class Kept:
    """A commit a registered lock names: whether it is cached, rooted, and its size."""

    repo: str
    commit: str
    specs: tuple[str, ...]
    cached: bool
    rooted: bool
    size: int

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "specs": list(self.specs)}


@dataclass(frozen=True)
class LockKeeps:
    """What one registered lock keeps in the cache."""

    lock: Path
    lock_id: str
    live: bool
    kept: tuple[Kept, ...]

    @property
    def size(self) -> int:
        return sum(k.size for k in self.kept)

    def to_dict(self) -> dict[str, object]:
        return {
            "lock": str(self.lock),
            "lock_id": self.lock_id,
            "live": self.live,
            "size": self.size,
            "commits": [k.to_dict() for k in self.kept],
        }


@dataclass(frozen=True)
class CacheListing:
    """`kernlock cache list`: each registered lock, and the roots of locks not registered here."""

    cache: Path
    locks: tuple[LockKeeps, ...]
    unregistered: tuple[Root, ...]  # another user's, or a registration lost with the private cache

    def to_dict(self) -> dict[str, object]:
        return {
            "cache": str(self.cache),
            "locks": [lk.to_dict() for lk in self.locks],
            "unregistered": [
                {"repo": r.repo, "commit": r.commit, "ref": r.ref()} for r in self.unregistered
            ],
        }


def _registered() -> list[Registration]:
    found = registrations()
    if found is None:
        from kernlock._internal.settings import CACHE_DIR_ENV, NO_CACHE_ENV

        raise UsageError(
            f"kernlock's private directory is off (${NO_CACHE_ENV}, or it is not this user's "
            "alone), so no lock is registered: kernlock cannot tell what the cache keeps for which "
            "lock",
            fix=f"unset {NO_CACHE_ENV}, or set {CACHE_DIR_ENV} to a directory of your own",
        )
    return found


def cache_list() -> CacheListing:
    """What each registered lock keeps in the Hub cache."""
    cache = hub_cache_dir()
    found = _registered()
    present = set(roots(cache))
    locks = []
    for registration in found:
        kept = []
        for (repo, commit), specs in sorted(registration.needs().items()):
            folder = repo_folder(repo)
            cached = snapshot_present(cache, folder, commit)
            kept.append(
                Kept(
                    repo,
                    commit,
                    specs,
                    cached,
                    Root(folder, commit, registration.lock_id) in present,
                    snapshot_size(cache, folder, commit) if cached else 0,
                )
            )
        locks.append(
            LockKeeps(registration.lock, registration.lock_id, registration.live(), tuple(kept))
        )
    known = {r.lock_id for r in found}
    return CacheListing(
        cache, tuple(locks), tuple(r for r in sorted(present) if r.lock_id not in known)
    )


@dataclass
class PruneReport:
    """`kernlock cache prune`: the commits freed (or to be freed, `dry_run`), the roots removed, the
    registrations expired."""

    cache: Path
    dry_run: bool
    freed: list[str] = field(default_factory=list)  # "org/repo@commit"
    kept: list[str] = field(default_factory=list)  # unrooted, still named by another ref
    unrooted: list[str] = field(default_factory=list)  # root refs removed
    expired: list[str] = field(default_factory=list)  # lock paths
    bytes: int = 0
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The report as JSON (`kernlock cache prune --json`)."""
        return {**asdict(self), "cache": str(self.cache)}


def prune(dry_run: bool = False) -> PruneReport:
    """Free the commits kernlock rooted that no registered lock names now (`dry_run`: say which,
    change nothing)."""
    cache = hub_cache_dir()
    found = _registered()
    report = PruneReport(cache=cache, dry_run=dry_run)
    needs = {r.lock_id: set(r.needs()) for r in found}
    needed = set().union(*needs.values())
    present = roots(cache)
    stale = [root for root in present if _stale(cache, root, needs)]
    missing = [  # a live lock's cached commit with no root of its own (synced before it registered)
        root_for(repo, commit, identity)
        for identity, pairs in needs.items()
        for repo, commit in sorted(pairs)
        if snapshot_present(cache, repo_folder(repo), commit)
        and root_for(repo, commit, identity) not in present
    ]
    staying = {(r.folder, r.commit) for r in [*present, *missing] if r not in stale}
    candidates: set[tuple[str, str]] = set()
    for root in stale:
        pair = (root.folder, root.commit)
        if pair in candidates or not snapshot_present(cache, *pair):
            continue
        if (root.repo, root.commit) in needed:
            continue
        if pair in staying or root.commit in other_refs(cache, root.folder):
            report.kept.append(f"{root.repo}@{root.commit[:12]}")
            staying.add(pair)  # said once
        else:
            candidates.add(pair)
    if not dry_run:  # a candidate's root goes with it (huggingface_hub deletes a revision's refs)
        _reroot(
            cache, [r for r in stale if (r.folder, r.commit) not in candidates], missing, report
        )
    freed = _free(cache, candidates, {r.ref() for r in stale}, report)
    report.unrooted = [  # a candidate kept (a warning says why) keeps its root for the next prune
        f"{r.repo}@{r.commit[:12]} ({r.ref()})"
        for r in stale
        if (r.folder, r.commit) not in candidates or r.commit in freed
    ]
    if not dry_run:
        for root in (r for r in stale if r.commit in freed):  # its lock's directory, once empty
            with suppress(OSError, KernlockError):
                remove_root(cache, root)
        _expire(cache, found)
    report.expired = [str(r.lock) for r in found if not r.live()]
    return report


def _expire(cache: Path, found: list[Registration]) -> None:
    """Each registration whose lock is gone leaves `cache` once it has no root left there (one a
    warning kept stays, for the next prune)."""
    from kernlock._internal.store.registry import leave_cache

    rooted = {root.lock_id for root in roots(cache)}
    for registration in found:
        if not registration.live() and registration.lock_id not in rooted:
            leave_cache(registration, cache)


def _stale(cache: Path, root: Root, needs: dict[str, set[tuple[str, str]]]) -> bool:
    """Whether a root goes: its snapshot is gone (huggingface_hub's scan calls a ref to a missing
    commit corrupted), or it is a registered lock's and that lock no longer names the commit."""
    if not snapshot_present(cache, root.folder, root.commit):
        return True
    return root.lock_id in needs and (root.repo, root.commit) not in needs[root.lock_id]


def _reroot(cache: Path, stale: list[Root], missing: list[Root], report: PruneReport) -> None:
    """Remove the stale roots and write the missing ones (what cannot be changed is a warning)."""
    for root in stale:
        try:
            remove_root(cache, root)
        except (OSError, KernlockError) as error:
            report.warnings.append(f"{root.ref()} of {root.repo}: not removed ({_why(error)})")
    for root in missing:
        with suppress(OSError, KernlockError):  # costs only protection from `hf cache prune`
            add_root(cache, root)


def _free(
    cache: Path, candidates: set[tuple[str, str]], stale: set[str], report: PruneReport
) -> set[str]:
    """Delete the candidate revisions with huggingface_hub's own deletion (blobs other revisions
    link stay). One named by a ref other than the `stale` roots (made since), or also cached under
    another repo folder (a revision is deleted by its hash in every repo), stays; so does one
    holding a link out of the repo (a warning). The hashes freed."""
    if not candidates:
        return set()
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(cache)
    chosen: dict[str, str] = {}
    held: set[str] = set()  # kept: a ref or another repo folder names it, or a warning said why
    hashes = {commit for _, commit in candidates}
    for repo in info.repos:
        for revision in (r for r in repo.revisions if r.commit_hash in hashes):
            name = f"{repo.repo_id}@{revision.commit_hash[:12]}"
            outside = _link_outside(repo.repo_path, revision)
            if outside is not None:
                report.warnings.append(
                    f"{name}: not freed ({outside} is a link out of the repo's blobs, which "
                    "kernlock never makes: deleting the revision would delete what it points to); "
                    f"remove the link by hand: `rm -- {outside}`"
                )
            mine = (repo.repo_path.name, revision.commit_hash) in candidates
            if outside is None and mine and revision.refs <= stale:
                chosen.setdefault(revision.commit_hash, name)
            else:
                held.add(revision.commit_hash)
                if outside is None and mine:
                    report.kept.append(name)
    for folder, commit in sorted(candidates):
        if commit not in chosen and commit not in held:
            report.warnings.append(
                f"{repo_of(folder)}@{commit[:12]}: not freed (huggingface_hub's scan cannot "
                f"read that repo: {'; '.join(str(w) for w in info.warnings) or 'no such revision'})"
            )
    for commit in held & set(chosen):  # the same commit cached under another repo folder
        report.kept.append(chosen.pop(commit))
    if not chosen:
        return set()
    strategy = info.delete_revisions(*sorted(chosen))
    report.bytes = strategy.expected_freed_size
    report.freed = sorted(chosen.values())
    if not report.dry_run:
        strategy.execute()
    return set(chosen)


def _link_outside(repo_path: Path, revision: CachedRevisionInfo) -> Path | None:
    """A snapshot entry of `revision` whose blob is neither in the repo's `blobs/` nor the snapshot
    itself (a link another user of a shared cache planted): huggingface_hub's deletion would delete
    its target."""
    import os

    blobs = os.path.join(repo_path, "blobs", "")
    snapshot = os.path.join(revision.snapshot_path, "")
    for file in revision.files:
        blob = os.path.normpath(file.blob_path)
        if not (blob.startswith(blobs) or blob.startswith(snapshot)):
            return file.file_path
    return None
