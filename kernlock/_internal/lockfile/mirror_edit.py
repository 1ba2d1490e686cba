"""Recording pushes in the lock: `with_mirror` (after `kernlock vendor --to`), `carry_mirrors` (a
re-lock that pins the same kernels keeps them), `recorded_index` (what a pull by location
fetches)."""

from __future__ import annotations

from dataclasses import replace

from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.lockfile.format_version import format_version
from kernlock._internal.lockfile.mirror import Mirror

MIRROR_FORMAT = "1.6"  # the lock format that holds `[[mirror]]`


def with_mirror(lock: Lockfile, url: str, index: str) -> Lockfile:
    """`lock` recording that its kernels were pushed to `url` as the index `index` (replacing an
    older record of `url`)."""
    mirrors = (*(m for m in lock.mirrors if m.url != url), Mirror(url=url, index=index))
    version = max(lock.version, MIRROR_FORMAT, key=format_version)
    return replace(lock, mirrors=tuple(sorted(mirrors, key=lambda m: m.url)), version=version)


def carry_mirrors(previous: Lockfile | None, lock: Lockfile) -> Lockfile:
    """A re-lock keeps the previous lock's mirror records while it pins the same kernels (their
    pushed indexes still hold exactly these variants); a changed pin drops them."""
    if previous is None or not previous.mirrors or previous.kernels != lock.kernels:
        return lock
    for mirror in previous.mirrors:
        lock = with_mirror(lock, mirror.url, mirror.index)
    return lock


def recorded_index(lock: Lockfile, location: str) -> str | None:
    """The index digest the lock records for `location`, if any."""
    return next((m.index for m in lock.mirrors if m.url == location), None)
