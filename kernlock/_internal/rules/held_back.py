"""What a cooldown holds back in `kernlock outdated`: a moved branch whose new commits are newer
than the cut-off a re-lock would use now keeps its locked commit (or moves to one not as new)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.lockfile.exclude_newer import ExcludeNewer

if TYPE_CHECKING:
    from kernlock._internal.hub.client import Hub


@dataclass(frozen=True)
class BranchCooldown:
    """A cooldown as a re-lock applies it now: each repo's cut-off, and `take(entry, branch,
    cutoff)`, the newest commit of the branch from before the cut-off with the entry's builds
    (None: none)."""

    cutoffs: ExcludeNewer
    take: Callable[[LockedKernel, str, datetime], str | None]


def cooled_commit(
    kernel: LockedKernel, head: str | None, hub: Hub, taken: str | None
) -> str | None:
    """What a re-lock takes of the entry's moved branch (now at `head`) under the cooldown, where
    not the head: `taken`, or the locked commit when nothing newer than it is old enough (None: the
    head)."""
    if taken == head:
        return None
    history = hub.commits(kernel.repo, str(kernel.ref))  # newest first
    if taken is None or taken not in history or kernel.commit not in history:
        return kernel.commit
    return taken if history.index(taken) < history.index(kernel.commit) else kernel.commit
