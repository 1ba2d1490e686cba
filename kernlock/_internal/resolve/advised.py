"""Keeping advised builds (`kernlock._internal.spec.advisories`) out of a lock.

After the resolver has an entry's builds, `screen` checks each locked variant against the
project's advisories (with the Hub's branch histories, so a commit pin is judged too). A
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
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kernlock._internal.hub.variants import choose_variant, group_variants
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.lockfile.target_pins import is_target_pin, target_pin
from kernlock._internal.resolve.jobs import Job
from kernlock._internal.spec.advisories import Advisory, first_advisory
from kernlock._internal.spec.kernel_spec import version_of_branch
from kernlock._internal.spec.target import Target
from kernlock.errors import ResolutionError

if TYPE_CHECKING:
    from kernlock._internal.hub.client import Hub
    from kernlock._internal.hub.responses import Ref


class Resolver(Protocol):
    """What screening needs of `kernlock._internal.resolve.resolver.Resolver` (a protocol: the
    resolver imports this module)."""

    options: Any  # ResolveOptions: `advisories`, `all_variants`
    hub: Hub
    warnings: list[str]
    reasons: dict[tuple[str, str], str]

    def history(self, repo: str, branch: str) -> list[str]: ...

    def _lock_commit(
        self,
        job: Job,
        *,
        repo: str,
        commit: str,
        ref: str | None,
        version: int | None,
        resolution: str,
        refs: list[Ref] | None = None,
    ) -> LockedKernel: ...


MAX_CANDIDATES = 50  # commits of the entry's branch tried before the advisory's fix


class Replacement(NamedTuple):
    commit: str
    ref: str | None
    version: int | None
    why: str  # `nearest good commit of v3`, `its fix, v2`


def advised_targets(resolver: Resolver, kernel: LockedKernel) -> dict[Target, tuple[str, Advisory]]:
    """The entry's targets whose locked variant an advisory covers: target -> (variant,
    advisory)."""
    found = {}
    for variant in kernel.variants:
        advisory, _ = first_advisory(
            resolver.options.advisories,
            kernel.names(),
            kernel.commit,
            kernel.ref,
            variant.name,
            (f.sha256 for f in variant.files),
            resolver.history,
        )
        if advisory is not None:
            found.update(dict.fromkeys(variant.targets, (variant.name, advisory)))
    return found


def _good_build(
    resolver: Resolver, kernel: LockedKernel, commit: str, ref: str | None, target: Target
) -> bool:
    """Whether `commit` has a build for `target` that no advisory covers by its name (hashes are
    checked once locked)."""
    names = sorted(group_variants(kernel.repo, commit, resolver.hub.tree(kernel.repo, commit)))
    variant, _ = choose_variant(names, target)
    if variant is None:
        return False
    advisory, _ = first_advisory(
        resolver.options.advisories, kernel.names(), commit, ref, variant, (), resolver.history
    )
    return advisory is None


def _replacement(
    resolver: Resolver, kernel: LockedKernel, target: Target, advisory: Advisory
) -> Replacement | None:
    """Where `target` goes instead: the nearest good commit of the entry's branch, else the
    advisory's fix."""
    refs = resolver.hub.refs(kernel.repo)
    branches = {r.name: r.commit for r in refs if r.kind == "branch"}
    if kernel.ref in branches:
        assert kernel.ref is not None
        history = resolver.history(kernel.repo, kernel.ref)
        at = history.index(kernel.commit) if kernel.commit in history else 0
        order = sorted(
            (i for i in range(len(history)) if history[i] != kernel.commit),
            key=lambda i: (abs(i - at), i > at),
        )[:MAX_CANDIDATES]
        for index in order:
            if _good_build(resolver, kernel, history[index], kernel.ref, target):
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
                    for c in resolver.history(kernel.repo, b)
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
    if not _good_build(resolver, kernel, commit, ref, target):
        return None
    return Replacement(commit, ref, version_of_branch(ref or ""), f"its fix, {name}")


def screen(
    resolver: Resolver, made: list[tuple[LockedKernel, Job]]
) -> list[tuple[LockedKernel, Job]]:
    """`made` with every advised build replaced (see the module), or `ResolutionError` where none
    can be."""
    screened = []
    for kernel, owner in made:
        screened.extend(_screen_one(resolver, kernel, owner))
    return screened


def _screen_one(
    resolver: Resolver, kernel: LockedKernel, owner: Job
) -> list[tuple[LockedKernel, Job]]:

    bad = advised_targets(resolver, kernel)
    if not bad:
        return [(kernel, owner)]
    moves: dict[Target, Replacement] = {}
    for target, (variant, advisory) in sorted(bad.items()):
        found = _replacement(resolver, kernel, target, advisory)
        if found is None:
            raise ResolutionError(
                f"{kernel.spec}: the build for {target} ({variant} at {kernel.commit[:12]}) is "
                f"advised by {advisory.title} ({advisory.source}), and neither another commit of "
                f"{kernel.ref or 'its ref'} nor the advisory's fix "
                f"({advisory.fix_text(kernel.repo)}) has a good build for it; nothing was written",
                fix="drop that target, or pin a revision the advisory does not cover "
                f"(`kernlock lock {kernel.repo}@<rev>`)",
            )
        moves[target] = found
        resolver.warnings.append(
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
        moved = resolver._lock_commit(
            owner,
            repo=kernel.repo,
            commit=first.commit,
            ref=first.ref,
            version=first.version,
            resolution=f"{kernel.resolution}; {kernel.commit[:12]} is advised ({advisory.id}): "
            f"{first.why}",
        )
        _refuse_advised(resolver, moved)
        resolver.reasons[owner.identity] = f"advisory {advisory.id}: {first.why}"
        return [(replace(moved, aliases=kernel.aliases), owner)]
    made: list[tuple[LockedKernel, Job]] = []
    for target, found in sorted(moves.items()):
        variant, advisory = bad[target]
        reason = f"advisory {advisory.id}: {found.why}"
        pin_job = owner.for_target(target, target_pin(target, found.commit, reason))
        pinned = resolver._lock_commit(
            pin_job,
            repo=kernel.repo,
            commit=found.commit,
            ref=found.ref,
            version=found.version,
            resolution=f"{variant} at {kernel.commit[:12]} is advised ({advisory.title}); "
            f"{found.why}",
        )
        _refuse_advised(resolver, pinned)
        made.append((replace(pinned, aliases=kernel.aliases), pin_job))
    rest = tuple(t for t in owner.targets if t not in moves)
    if not rest:
        return made
    kept = replace(
        kernel,
        variants=tuple(
            replace(v, targets=tuple(t for t in v.targets if t in rest))
            for v in kernel.variants
            if resolver.options.all_variants or any(t in rest for t in v.targets)
        ),
    )
    return [(kept, replace(owner, targets=rest)), *made]


def _refuse_advised(resolver: Resolver, kernel: LockedKernel) -> None:
    """A replacement whose files an advisory covers by hash: refused rather than searched
    further."""
    bad = advised_targets(resolver, kernel)
    if bad:
        target, (variant, advisory) = min(bad.items())
        raise ResolutionError(
            f"{kernel.spec}: {variant} at {kernel.commit[:12]}, the replacement for {target}, is "
            f"advised too ({advisory.title}); nothing was written",
            fix=f"pin a revision no advisory covers (`kernlock lock {kernel.repo}@<rev>`), "
            "or drop that target",
        )
