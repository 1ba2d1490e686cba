"""The ``advisories`` check of `verify`: the lock holds no build the project's advisories cover.

Offline (`kernlock._internal.spec.advisories`): the lock's `ref` stands for a branch, and a commit
within a range bounded by `introduced`/`fixed` cannot be placed without the branch's
history, which is a note (`kernlock lock` asks the Hub and re-pins). A URL source is fetched.
An advisory the project ignores (`ignore-advisories`) is a note while its ignore lasts; an expired
ignore is a problem, and its advisory applies again.
"""

from __future__ import annotations

from kernlock._internal.lockfile.entries import LockedKernel, LockedVariant, Lockfile
from kernlock._internal.project.advisory_sources import project_advisories
from kernlock._internal.project.config import Project
from kernlock._internal.rules.findings import CheckResult
from kernlock._internal.spec.advisories import Advisory, first_advisory
from kernlock._internal.spec.advisory_ignores import KEY, today_utc
from kernlock._internal.wording import plural


def lock_advisories(
    lock: Lockfile, advisories: tuple[Advisory, ...]
) -> list[tuple[LockedKernel, LockedVariant, Advisory | None, list[Advisory]]]:
    """Each locked variant an advisory covers (or may cover): (entry, variant, advisory, undecided
    ones)."""
    found = []
    for kernel in lock.kernels:
        for variant in kernel.variants:
            advisory, undecided = first_advisory(
                advisories,
                kernel.names(),
                kernel.commit,
                kernel.ref,
                variant.name,
                (f.sha256 for f in variant.files),
            )
            if advisory is not None or undecided:
                found.append((kernel, variant, advisory, undecided))
    return found


def check_advisories(project: Project, lock: Lockfile, result: CheckResult) -> None:
    """A problem per locked variant an advisory covers, naming the advisory and its fix, and per
    expired ignore."""
    advisories, ignored = project_advisories(project)
    _check_ignores(project, (*advisories, *ignored), result)
    for kernel, variant, advisory, _ in lock_advisories(lock, ignored):
        if advisory is not None:
            [ignore] = [i for i in project.ignore_advisories if i.id == advisory.id]
            until = f"until {ignore.until}" if ignore.until else "with no end date"
            reason = f": {ignore.reason}" if ignore.reason else ""
            result.note(
                f"{kernel.spec}: {variant.name} at {kernel.commit[:12]} is advised by "
                f"{advisory.id}, which {KEY} ignores {until}{reason}",
                kernel=kernel.spec,
                variant=variant.name,
            )
    for kernel, variant, advisory, undecided in lock_advisories(lock, advisories):
        targets = ", ".join(map(str, variant.targets)) or "no target"
        if advisory is not None:
            result.problem(
                f"{kernel.spec}: {variant.name} at {kernel.commit[:12]} ({targets}) is advised by "
                f"{advisory.title} ({advisory.source})",
                "kernlock lock (it re-pins those targets; the advisory's fix: "
                f"{advisory.fix_text(kernel.repo)})",
                kernel=kernel.spec,
                variant=variant.name,
                advisory=advisory.id,
            )
        for maybe in undecided:
            result.notes.append(
                f"{kernel.spec}: whether {kernel.commit[:12]} lies in {maybe.id}'s range of "
                f"{maybe.branch} needs the branch's history; `kernlock lock` checks it against the "
                "Hub"
            )
    total = len(advisories) + len(ignored)
    count = f"{total} advisor{'y' if total == 1 else 'ies'}"
    result.summary = f"{count} from {plural(len(project.advisories), 'source')}"


def _check_ignores(project: Project, advisories: tuple[Advisory, ...], result: CheckResult) -> None:
    """An expired ignore is a problem (its advisory applies again); one naming none is a note."""
    today, known = today_utc(), {a.id for a in advisories}
    for ignore in project.ignore_advisories:
        line = project.lines.get(ignore.id)
        where = f"{project.pyproject.name}:{line}" if line else project.pyproject.name
        if ignore.expired(today):
            reason = f" ({ignore.reason})" if ignore.reason else ""
            result.problem(
                f"{where}: the ignore of advisory {ignore.id}{reason} in [tool.kernlock] {KEY} "
                f"expired on {ignore.until}; the advisory applies again",
                f"review {ignore.id}, then set a later until on its entry in {KEY} or remove the "
                "entry",
                file=str(project.pyproject),
                line=line,
                advisory=ignore.id,
                rule="expired-ignore",
            )
        elif ignore.id not in known:
            result.notes.append(
                f"{where}: [tool.kernlock] {KEY} names {ignore.id}, which no advisory source "
                "declares"
            )
