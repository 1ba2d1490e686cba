"""Keeping advised builds (`kernlock._internal.spec.advisories`) out of a lock.

After the resolver has an entry's builds, its `AdvisoryScreen` checks each locked variant against
the project's advisories (with the Hub's branch histories, so a commit pin is judged too). A
target whose build is advised goes, in this order of preference, to

1. the nearest commit of the entry's own branch (by distance in its history; a newer one on
   a tie) whose build for that target no advisory covers;
2. the advisory's fix (`[advisory.fix]`: a version, a branch or tag, or a commit);

and otherwise the lock fails, naming the advisory. Where every target of the entry goes to
the same commit of its own branch, the whole entry moves; else each advised target becomes
a per-target pin (`kernlock._internal.lockfile.target_pins`) and the others keep the entry's commit.
Each step is said in a warning line and in the change line's reason.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.variants import choose_variant, group_variants
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.lockfile.target_pins import is_target_pin, target_pin
from kernlock._internal.resolve.commit_lock import CommitLocker, Pin
from kernlock._internal.resolve.jobs import Job
from kernlock._internal.spec.advisories import Advisory, first_advisory
from kernlock._internal.spec.kernel_spec import version_of_branch
from kernlock._internal.spec.target import Target
from kernlock.errors import ResolutionError

MAX_CANDIDATES = 50  # commits of the entry's branch tried before the advisory's fix


class Replacement(NamedTuple):
    commit: str
    ref: str | None
    version: int | None
    why: str  # `nearest good commit of v3`, `its fix, v2`


class AdvisoryScreen:
    """Screens an entry's builds against the project's advisories, locking a replacement through its
    `CommitLocker`; `reasons` says where an entry moved (by identity)."""

    def __init__(
        self,
        hub: Hub,
        advisories: tuple[Advisory, ...],
        locker: CommitLocker,
        warnings: list[str],
        all_variants: bool = False,
    ) -> None:
        self.hub = hub
        self.advisories = advisories
        self.locker = locker
        self.warnings = warnings  # shared with the resolver's other parts, in the order said
        self.all_variants = all_variants
        self.reasons: dict[tuple[str, str], str] = {}
        self._histories: dict[tuple[str, str], list[str]] = {}

    def history(self, repo: str, branch: str) -> list[str]:
        """A branch's commits, newest first (none when the Hub has no such branch); asked once per
        resolution."""
        key = (repo, branch)
        if key not in self._histories:
            try:
                self._histories[key] = self.hub.commits(repo, branch)
            except ResolutionError:
                self._histories[key] = []
        return self._histories[key]

    def advised_targets(self, kernel: LockedKernel) -> dict[Target, tuple[str, Advisory]]:
        """The entry's targets whose locked variant an advisory covers: target -> (variant,
        advisory)."""
        found = {}
        for variant in kernel.variants:
            advisory, _ = first_advisory(
                self.advisories,
                kernel.names(),
                kernel.commit,
                kernel.ref,
                variant.name,
                (f.sha256 for f in variant.files),
                self.history,
            )
            if advisory is not None:
                found.update(dict.fromkeys(variant.targets, (variant.name, advisory)))
        return found

    def _good_build(
        self, kernel: LockedKernel, commit: str, ref: str | None, target: Target
    ) -> bool:
        """Whether `commit` has a build for `target` that no advisory covers by its name (hashes are
        checked once locked)."""
        names = sorted(group_variants(kernel.repo, commit, self.hub.tree(kernel.repo, commit)))
        variant, _ = choose_variant(names, target)
        if variant is None:
            return False
        advisory, _ = first_advisory(
            self.advisories, kernel.names(), commit, ref, variant, (), self.history
        )
        return advisory is None

    def _replacement(
        self, kernel: LockedKernel, target: Target, advisory: Advisory
    ) -> Replacement | None:
        """Where `target` goes instead: the nearest good commit of the entry's branch, else the
        advisory's fix."""
        refs = self.hub.refs(kernel.repo)
        branches = {r.name: r.commit for r in refs if r.kind == "branch"}
        if kernel.ref in branches:
            assert kernel.ref is not None
            history = self.history(kernel.repo, kernel.ref)
            at = history.index(kernel.commit) if kernel.commit in history else 0
            order = sorted(
                (i for i in range(len(history)) if history[i] != kernel.commit),
                key=lambda i: (abs(i - at), i > at),
            )[:MAX_CANDIDATES]
            for index in order:
                if self._good_build(kernel, history[index], kernel.ref, target):
                    return Replacement(
                        history[index],
                        kernel.ref,
                        kernel.version,
                        f"nearest good commit of {kernel.ref}",
                    )
        fix = advisory.fix
        if fix is None:
            return None
        tags = {r.name: r.commit for r in refs if r.kind == "tag"}
        name = fix.revision_text
        if fix.commit is not None:
            commit, ref = fix.commit, None
            if len(commit) < 40:
                commit = next(
                    (
                        c
                        for b in branches
                        for c in self.history(kernel.repo, b)
                        if c.startswith(commit)
                    ),
                    commit,
                )
        elif name in branches:
            commit, ref = branches[name], name
        elif name in tags:
            commit, ref = tags[name], name
        else:
            return None
        if not self._good_build(kernel, commit, ref, target):
            return None
        return Replacement(commit, ref, version_of_branch(ref or ""), f"its fix, {name}")

    def screen(self, made: list[tuple[LockedKernel, Job]]) -> list[tuple[LockedKernel, Job]]:
        """`made` with every advised build replaced (see the module), or `ResolutionError` where
        none can be."""
        if not self.advisories:
            return made
        screened = []
        for kernel, owner in made:
            screened.extend(self._screen_one(kernel, owner))
        return screened

    def _screen_one(self, kernel: LockedKernel, owner: Job) -> list[tuple[LockedKernel, Job]]:
        bad = self.advised_targets(kernel)
        if not bad:
            return [(kernel, owner)]
        moves: dict[Target, Replacement] = {}
        for target, (variant, advisory) in sorted(bad.items()):
            found = self._replacement(kernel, target, advisory)
            if found is None:
                raise ResolutionError(
                    f"{kernel.spec}: the build for {target} ({variant} at {kernel.commit[:12]}) "
                    f"is advised by {advisory.title} ({advisory.source}), and neither another "
                    f"commit of {kernel.ref or 'its ref'} nor the advisory's fix "
                    f"({advisory.fix_text(kernel.repo)}) has a good build for it; nothing was "
                    "written",
                    fix="drop that target, or pin a revision the advisory does not cover "
                    f"(`kernlock lock {kernel.repo}@<rev>`)",
                )
            moves[target] = found
            self.warnings.append(
                f"{kernel.spec}: {variant} at {kernel.commit[:12]} for {target} is advised by "
                f"{advisory.title}; locked {found.commit[:12]} ({found.why}) for it instead"
            )
        first = next(iter(moves.values()))
        whole = (
            set(moves) == {t for v in kernel.variants for t in v.targets}
            and len({m.commit for m in moves.values()}) == 1
        )
        # the whole entry moves (to its fix: a whole-branch change)
        if whole and not is_target_pin(owner.override):
            advisory = bad[min(bad)][1]
            moved = self.locker.lock(
                owner,
                Pin(
                    kernel.repo,
                    first.commit,
                    first.ref,
                    first.version,
                    f"{kernel.resolution}; {kernel.commit[:12]} is advised ({advisory.id}): "
                    f"{first.why}",
                ),
            )
            self._refuse_advised(moved)
            self.reasons[owner.identity] = f"advisory {advisory.id}: {first.why}"
            return [(replace(moved, aliases=kernel.aliases), owner)]
        made: list[tuple[LockedKernel, Job]] = []
        for target, found in sorted(moves.items()):
            variant, advisory = bad[target]
            reason = f"advisory {advisory.id}: {found.why}"
            pin_job = owner.for_target(target, target_pin(target, found.commit, reason))
            pinned = self.locker.lock(
                pin_job,
                Pin(
                    kernel.repo,
                    found.commit,
                    found.ref,
                    found.version,
                    f"{variant} at {kernel.commit[:12]} is advised ({advisory.title}); {found.why}",
                ),
            )
            self._refuse_advised(pinned)
            made.append((replace(pinned, aliases=kernel.aliases), pin_job))
        rest = tuple(t for t in owner.targets if t not in moves)
        if not rest:
            return made
        kept = replace(
            kernel,
            variants=tuple(
                replace(v, targets=tuple(t for t in v.targets if t in rest))
                for v in kernel.variants
                if self.all_variants or any(t in rest for t in v.targets)
            ),
        )
        return [(kept, replace(owner, targets=rest)), *made]

    def _refuse_advised(self, kernel: LockedKernel) -> None:
        """A replacement whose files an advisory covers by hash: refused rather than searched
        further."""
        bad = self.advised_targets(kernel)
        if bad:
            target, (variant, advisory) = min(bad.items())
            raise ResolutionError(
                f"{kernel.spec}: {variant} at {kernel.commit[:12]}, the replacement for {target}, "
                f"is advised too ({advisory.title}); nothing was written",
                fix=f"pin a revision no advisory covers (`kernlock lock {kernel.repo}@<rev>`), "
                "or drop that target",
            )
