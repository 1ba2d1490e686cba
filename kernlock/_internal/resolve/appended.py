"""Append, don't move: a build for a new target published after the locked commit of a branch.

kernel-builder publishes the builds for a new Torch as new commits on the same version
branch (kernels-community#1082). When a lock holds commit C of branch B for some targets
and a target is added for which C has no build, `find_appended` walks B's history from its
tip back to C for commits that have one:

* the newest such commit C' at which every variant locked at C is byte for byte the same
  (the same paths with the same git blob or LFS sha256) and is still kernels' choice for
  the targets it serves: the whole entry moves to C', and nothing that ran before changes;
* failing that, the newest commit with a build for the new target: that target alone is
  pinned there (`kernlock._internal.lockfile.target_pins`) and the other targets keep C.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import TreeFile
from kernlock._internal.hub.variants import choose_variant, group_variants
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.spec.cooldown import parse_date
from kernlock._internal.spec.target import Target

# newer commits of one branch looked at: a version branch gains a few per Torch release
MAX_HISTORY = 200


@dataclass(frozen=True)
class AppendPlan:
    """Where the new targets' builds are: `move_to` (the whole entry), else one commit per target in
    `pins`."""

    move_to: str | None = None
    pins: dict[Target, str] = field(default_factory=dict)
    # per pinned target: why the entry could not move
    kept_at: dict[Target, str] = field(default_factory=dict)


def _fingerprints(grouped: dict[str, list[TreeFile]]) -> dict[str, frozenset[tuple[str, str]]]:
    """Each variant's files as (path, content id): the LFS sha256, else the git blob id (a hash of
    the bytes)."""
    return {
        name: frozenset((f.path, f.lfs_sha256 or f.blob_id) for f in files)
        for name, files in grouped.items()
    }


def _why_changed(
    kernel: LockedKernel,
    base: dict[str, frozenset[tuple[str, str]]],
    there: dict[str, frozenset[tuple[str, str]]],
    names: list[str],
) -> str | None:
    """Why the entry cannot move to a commit: a locked variant changed or is no longer chosen; None
    when it can."""
    for variant in kernel.variants:
        if there.get(variant.name) != base.get(variant.name):
            return f"{variant.name} is {'rebuilt' if variant.name in there else 'gone'} there"
        for target in variant.targets:
            choice, _ = choose_variant(names, target)
            if choice != variant.name:
                return (
                    f"kernels would load {choice or 'nothing'} instead of {variant.name} on "
                    f"{target} there"
                )
    return None


def find_appended(
    hub: Hub, kernel: LockedKernel, missing: list[Target], cutoff: datetime | None = None
) -> AppendPlan | None:
    """Where builds for `missing` (targets the entry's commit has no build for) were appended to its
    branch (by `cutoff`, under a cooldown).

    None when the entry is not on a branch, its commit left the branch's history, or no newer commit
    has a build for any of them.
    """
    if kernel.ref is None or not any(
        r.name == kernel.ref and r.kind == "branch" for r in hub.refs(kernel.repo)
    ):
        return None
    dated = hub.dated_commits(kernel.repo, kernel.ref)  # newest first
    history = [commit for commit, _ in dated]
    if kernel.commit not in history:
        return None  # force-pushed past the lock: nothing was appended to *its* history
    newer = [
        commit
        for commit, date in dated[: history.index(kernel.commit)]
        if cutoff is None or (date is not None and parse_date(date) <= cutoff)
    ][:MAX_HISTORY]
    if not newer:
        return None
    base = _fingerprints(
        group_variants(kernel.repo, kernel.commit, hub.tree(kernel.repo, kernel.commit))
    )
    pins: dict[Target, str] = {}
    kept_at: dict[Target, str] = {}
    for commit in newer:
        grouped = group_variants(kernel.repo, commit, hub.tree(kernel.repo, commit))
        names = sorted(grouped)
        builds = [t for t in missing if choose_variant(names, t)[0] is not None]
        if not builds:
            continue
        why = _why_changed(kernel, base, _fingerprints(grouped), names)
        if len(builds) == len(missing) and why is None:
            return AppendPlan(move_to=commit)
        for target in builds:
            if target not in pins:
                pins[target] = commit
                kept_at[target] = why or "it lacks builds for other new targets"
    return AppendPlan(pins=pins, kept_at=kept_at) if pins else None
