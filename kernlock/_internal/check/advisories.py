"""The ``advisories`` check of `verify`: the lock holds no build the project's advisories cover.

Offline (`kernlock._internal.model.advisories`): the lock's `ref` stands for a branch, and a commit
within a range bounded by `introduced`/`fixed` cannot be placed without the branch's
history, which is a note (`kernlock lock` asks the Hub and re-pins). A URL source is fetched.
"""

from __future__ import annotations

from kernlock._internal.check.report import CheckResult, plural
from kernlock._internal.lockfile.model import LockedKernel, LockedVariant, Lockfile
from kernlock._internal.model.advisories import Advisory, first_advisory
from kernlock._internal.project.advisory_sources import load_advisories
from kernlock._internal.project.config import Project


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
    """A problem per locked variant an advisory covers, naming the advisory and its fix."""
    advisories = load_advisories(project.root, project.advisories)
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
    count = f"{len(advisories)} advisor{'y' if len(advisories) == 1 else 'ies'}"
    result.summary = f"{count} from {plural(len(project.advisories), 'source')}"
