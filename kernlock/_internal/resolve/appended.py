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

`AppendedBuilds`, a part the resolver is given, extends each entry kept from the previous lock so,
locking through the resolver's `CommitLocker`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import TreeFile
from kernlock._internal.hub.variants import choose_variant, group_variants
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.lockfile.kernels_json import MIGRATED
from kernlock._internal.lockfile.target_pins import target_pin
from kernlock._internal.resolve.commit_lock import CommitLocker, Pin
from kernlock._internal.resolve.jobs import Job
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


class AppendedBuilds:
    """Extends a previous entry to the job's new targets: at its commit, or at builds appended to
    its branch since; `reasons` says where an entry moved (by identity)."""

    def __init__(
        self, hub: Hub, locker: CommitLocker, cutoff: Callable[[str], datetime | None]
    ) -> None:
        self.hub = hub
        self.locker = locker
        self.cutoff = cutoff  # a repo's cooldown cut-off (None: none)
        self.reasons: dict[tuple[str, str], str] = {}

    def extend(self, previous: LockedKernel, job: Job) -> list[tuple[LockedKernel, Job]]:
        """Keep a pinned commit; add variants only for targets the old lock lacked.

        A new target the commit has no build for takes a build appended to the entry's branch since:
        the entry moves where its locked variants are unchanged, else that target alone is pinned to
        the commit with its build.
        """
        missing = [t for t in job.targets if previous.variant_for(t) is None]
        # a migrated pin
        if missing and previous.ref is not None and not previous.resolution.startswith(MIGRATED):
            # is kept as kernels' lock wrote it (`CommitLocker.lock` names a bad one)
            names = sorted(
                group_variants(
                    previous.repo, previous.commit, self.hub.tree(previous.repo, previous.commit)
                )
            )
            unbuilt = [t for t in missing if choose_variant(names, t)[0] is None]
            if unbuilt:
                appended = self._append(previous, job, unbuilt)
                if appended is not None:
                    return appended
        return [(self.locker.keep(previous, job), job)]

    def _append(
        self, previous: LockedKernel, job: Job, unbuilt: list[Target]
    ) -> list[tuple[LockedKernel, Job]] | None:
        """Lock `unbuilt` targets at builds appended to the entry's branch after its commit (None:
        there are none)."""
        plan = find_appended(self.hub, previous, unbuilt, self.cutoff(previous.repo))
        if plan is None:
            return None
        named = ", ".join(map(str, unbuilt))
        if plan.move_to is not None:
            moved = self.locker.lock(
                job,
                replace(
                    Pin.of(previous),
                    commit=plan.move_to,
                    resolution=f"{previous.resolution}; moved to {plan.move_to[:12]}: builds "
                    f"appended for {named}, locked variants unchanged",
                ),
            )
            before = {v.name: v.files for v in previous.variants}
            # the promise, by sha256
            if all(before.get(v.name, v.files) == v.files for v in moved.variants):
                self.reasons[job.identity] = (
                    f"moved to {plan.move_to[:12]}: builds appended, locked variants unchanged"
                )
                return [(replace(moved, aliases=previous.aliases), job)]
            plan = replace(
                plan,
                move_to=None,
                pins=dict.fromkeys(unbuilt, plan.move_to),
                kept_at=dict.fromkeys(unbuilt, "a locked variant's files differ there"),
            )
        made: list[tuple[LockedKernel, Job]] = []
        for target, commit in sorted(plan.pins.items()):
            reason = f"build appended at {commit[:12]}"
            pin_job = job.for_target(target, target_pin(target, commit, reason))
            kernel = self.locker.lock(
                pin_job,
                replace(
                    Pin.of(previous),
                    commit=commit,
                    resolution=f"{previous.ref}: {previous.commit[:12]} has no build for "
                    f"{target}; {reason} ({plan.kept_at[target]}, so the other targets keep "
                    f"{previous.commit[:12]})",
                ),
            )
            made.append((replace(kernel, aliases=previous.aliases), pin_job))
        rest = replace(job, targets=tuple(t for t in job.targets if t not in plan.pins))
        if not rest.targets:
            return made
        return [(self.locker.keep(previous, rest), rest), *made]
