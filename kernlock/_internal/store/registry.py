"""The locks this user's kernlock wrote or synced: the registrations `kernlock cache` reads.

One entry per lock file in the private per-user directory (`kernlock._internal.fs.private`:
written atomically, signed, this user's only), `root-<lock id>`: the lock's path, the (repo,
commit) pairs it named when it was last written or synced, and the Hub caches where it has roots
(`kernlock._internal.store.gc_roots`). A registration whose lock file is gone has expired: it
needs nothing, and it is dropped once no cache holds its roots. With the private directory off
(`KERNLOCK_NO_CACHE=1`) nothing registers, which costs only what `kernlock cache prune` can free:
the roots of a lock it does not know are kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.store.gc_roots import lock_id

_PREFIX = "root-"

# (repo, commit) -> the specs that lock it there (`org/repo@v4`)
Commits = dict[tuple[str, str], tuple[str, ...]]


def lock_commits(lock: Lockfile) -> Commits:
    """Every (repo, commit) a lock names, with the specs that lock it (overrides' entries too)."""
    named: dict[tuple[str, str], list[str]] = {}
    for kernel in lock.kernels:
        specs = named.setdefault((kernel.repo, kernel.commit), [])
        if kernel.spec not in specs:
            specs.append(kernel.spec)
    return {pair: tuple(specs) for pair, specs in named.items()}


@dataclass(frozen=True)
class Registration:
    """A registered lock: where it is, what it named when last written or synced, and the caches
    with its roots."""

    lock_id: str
    lock: Path
    recorded: Commits
    caches: tuple[str, ...]

    def live(self) -> bool:
        """Whether the lock file is still there (else the registration has expired)."""
        return self.lock.is_file()

    def needs(self) -> Commits:
        """What the lock names now: its current contents; what it named when registered if it
        cannot be read; nothing once it is gone."""
        from kernlock._internal.lockfile.serialize import load_lockfile
        from kernlock.errors import KernlockError

        if not self.live():
            return {}
        try:
            return lock_commits(load_lockfile(self.lock))
        except (KernlockError, OSError):
            return self.recorded


def _entry(identity: str) -> str:
    return _PREFIX + identity


def _read(name: str) -> Registration | None:
    from kernlock._internal.fs.private import read_entry

    payload = read_entry(name)
    try:
        data = json.loads(payload or b"null")
        return Registration(
            lock_id=name.removeprefix(_PREFIX),
            lock=Path(data["lock"]),
            recorded={(r, c): tuple(specs) for r, c, specs in data["commits"]},
            caches=tuple(data["caches"]),
        )
    except (TypeError, ValueError, KeyError):
        return None


def _write(registration: Registration) -> None:
    from kernlock._internal.fs.private import write_entry

    data = {
        "lock": str(registration.lock),
        "commits": [[r, c, list(s)] for (r, c), s in sorted(registration.recorded.items())],
        "caches": sorted(registration.caches),
    }
    write_entry(_entry(registration.lock_id), json.dumps(data, sort_keys=True).encode())


def register(lock_path: Path, lock: Lockfile, cache: Path | None = None) -> str:
    """Record (again) that `lock_path` holds `lock`, with roots in `cache` when given; its lock
    id."""
    identity = lock_id(lock_path)
    before = _read(_entry(identity))
    caches = set(before.caches if before else ())
    if cache is not None:
        caches.add(os.path.abspath(cache))
    _write(
        Registration(identity, Path(os.path.realpath(lock_path)), lock_commits(lock), tuple(caches))
    )
    return identity


def registrations() -> list[Registration] | None:
    """Every registration of this user (sorted by lock path); None when the private directory is
    off."""
    from kernlock._internal.fs.private import entry_names

    names = entry_names(_PREFIX)
    if names is None:
        return None
    found = [r for r in map(_read, names) if r is not None]
    return sorted(found, key=lambda r: str(r.lock))


def leave_cache(registration: Registration, cache: Path) -> None:
    """An expired registration no longer has roots in `cache`: dropped when no cache is left."""
    from kernlock._internal.fs.private import remove_entry

    caches = tuple(c for c in registration.caches if c != os.path.abspath(cache))
    if caches:
        _write(Registration(registration.lock_id, registration.lock, registration.recorded, caches))
    else:
        remove_entry(_entry(registration.lock_id))
