"""The cooldown at lock time: the cut-offs a resolution uses, and the commit of a branch it takes.

`lock_cutoffs` turns the settings (`--exclude-newer`, else `[tool.kernlock] exclude-newer` and
`exclude-newer-kernel`) into absolute dates, the lock's `[exclude-newer]`. A relative setting
(`7 days`) is counted back from now once: while the setting stays the same, a re-lock (and
`lock --check`) reuses the date the lock records, so the answer does not move with the clock;
`--upgrade` counts it again (`-P REPO`: REPO's own setting). A repo whose cut-off changed is
re-resolved (`changed_cutoffs`).

`before_cutoff` walks a branch's history (one listing, which carries the Hub's commit dates) from
its head to the newest commit dated at or before the cut-off that has a build for every target.
`outdated_cooldown` is the same cooldown for `kernlock outdated`, counted again from now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.variants import choose_variant, group_variants
from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.lockfile.exclude_newer import ExcludeNewer
from kernlock._internal.project.config import Project
from kernlock._internal.project.cooldown import read_value
from kernlock._internal.resolve.request import LockRequest
from kernlock._internal.rules.held_back import BranchCooldown
from kernlock._internal.spec.cooldown import Cooldown, format_date, parse_date
from kernlock._internal.spec.target import Target
from kernlock.errors import ResolutionError

# commits before the cut-off looked at for one with the targets' builds
MAX_CANDIDATES = 50


def _fix(repo: str) -> str:
    """The way out when no commit is old enough."""
    return (
        'take the head for now (`kernlock lock --exclude-newer "0 days"`), or shorten '
        f"[tool.kernlock] exclude-newer, or pin a revision ({repo}@<rev>)"
    )


def utc_now() -> datetime:
    """The time relative cut-offs count back from (the one clock of the cooldown)."""
    return datetime.now(timezone.utc)


def request_cutoffs(
    project: Project, request: LockRequest, previous: Lockfile | None
) -> ExcludeNewer | None:
    """The lock's `[exclude-newer]`: from `--exclude-newer` alone where given, else the
    project's settings."""
    default, per_repo = project.exclude_newer
    if request.exclude_newer is not None:
        default, per_repo = read_value(request.exclude_newer, "--exclude-newer"), ()
    return lock_cutoffs(
        default, per_repo, previous, request.upgrade, frozenset(request.upgrade_kernels)
    )


def lock_cutoffs(
    default: Cooldown | None,
    per_repo: Iterable[tuple[str, Cooldown]],
    previous: Lockfile | None,
    refresh_all: bool,
    refresh: frozenset[str],
    now: datetime | None = None,
) -> ExcludeNewer | None:
    """The lock's `[exclude-newer]` for these settings (None: no cooldown), relative ones counted
    back from `now` (default: `utc_now()`)."""
    per_repo = tuple(per_repo)
    if default is None and not per_repo:
        return None
    now = now or utc_now()
    kept = (previous.exclude_newer if previous is not None else None) or ExcludeNewer()

    def date(setting: Cooldown, old_date: str | None, old_span: str | None, fresh: bool) -> str:
        if setting.span is not None and setting.span == old_span and old_date and not fresh:
            return old_date
        return format_date(setting.cutoff(now))

    return ExcludeNewer(
        date=date(default, kept.date, kept.span, refresh_all) if default is not None else None,
        span=default.span if default is not None else None,
        kernel_date={
            repo: date(
                setting,
                kept.kernel_date.get(repo),
                kept.kernel_span.get(repo),
                refresh_all or repo in refresh,
            )
            for repo, setting in per_repo
        },
        kernel_span={repo: s.span for repo, s in per_repo if s.span is not None},
    )


def changed_cutoffs(previous: Lockfile | None, cutoffs: ExcludeNewer | None) -> frozenset[str]:
    """The repos of `previous` whose cut-off `cutoffs` changes: re-resolved, not kept."""
    if previous is None:
        return frozenset()
    old = previous.exclude_newer
    return frozenset(
        name
        for kernel in previous.kernels
        for name in kernel.names()
        if (old.cutoff(name) if old else None) != (cutoffs.cutoff(name) if cutoffs else None)
    )


def before_cutoff(
    hub: Hub,
    key: str,
    repo: str,
    branch: str,
    cutoff: datetime,
    targets: tuple[Target, ...],
    native_ok: bool,
) -> tuple[str, str]:
    """The newest commit of `branch` dated at or before `cutoff` with a build for every target
    (`native_ok`: any such commit), and a note for the lock's resolution; `ResolutionError` when
    there is none."""
    history = hub.dated_commits(repo, branch)
    older = [c for c, d in history if d is not None and parse_date(d) <= cutoff]
    when = format_date(cutoff)
    if not older:
        raise ResolutionError(
            f"{key}: every commit of {branch} is newer than the exclude-newer cut-off {when} "
            "(or the Hub gave it no date); nothing was written",
            fix=_fix(repo),
        )
    position = {commit: index for index, (commit, _) in enumerate(history)}
    for commit in older[:MAX_CANDIDATES]:
        names = sorted(group_variants(repo, commit, hub.tree(repo, commit)))
        if native_ok or all(choose_variant(names, t)[0] is not None for t in targets):
            skipped = position[commit]
            note = (
                f"; {skipped} newer {'commit' if skipped == 1 else 'commits'} skipped "
                f"(exclude-newer {when})"
                if skipped
                else ""
            )
            return commit, note
    raise ResolutionError(
        f"{key}: no commit of {branch} from before the exclude-newer cut-off {when} has a build "
        f"for {', '.join(map(str, targets))} (looked at {min(len(older), MAX_CANDIDATES)}); "
        "nothing was written",
        fix=_fix(repo),
    )


def outdated_cooldown(
    project: Project, lock: Lockfile, exclude_newer: str | None, hub: Hub
) -> tuple[BranchCooldown | None, Callable[[str], str]]:
    """The cooldown `kernlock outdated` applies (`exclude_newer` in place of the project's
    settings), each cut-off counted again from now as `kernlock lock --upgrade` counts it (None:
    no cooldown), and for a repo the re-lock that takes its update: `kernlock lock -P REPO`, or
    `--upgrade` where only it counts the repo's cut-off again (`-P` keeps the lock's date)."""
    import shlex

    default, per_repo = project.exclude_newer
    given = f" --exclude-newer {shlex.quote(exclude_newer)}" if exclude_newer is not None else ""
    if exclude_newer is not None:
        default, per_repo = read_value(exclude_newer, "--exclude-newer"), ()
    now = utc_now()
    fresh = lock_cutoffs(default, per_repo, lock, True, frozenset(), now)
    if fresh is None:
        return None, lambda repo: f"kernlock lock -P {repo}"

    def upgrade_only(repo: str) -> bool:
        one = lock_cutoffs(default, per_repo, lock, False, frozenset({repo}), now)
        return one is None or one.cutoff(repo) != fresh.cutoff(repo)

    def take(kernel: LockedKernel, branch: str, cutoff: datetime) -> str | None:
        targets = tuple(sorted({t for v in kernel.variants for t in v.targets}))
        native_ok = bool(kernel.devices)
        try:
            commit, _ = before_cutoff(
                hub, kernel.spec, kernel.repo, branch, cutoff, targets, native_ok
            )
        except ResolutionError:
            return None
        return commit

    def relock(repo: str) -> str:
        return f"kernlock lock {'--upgrade' if upgrade_only(repo) else f'-P {repo}'}{given}"

    return BranchCooldown(fresh, take), relock
