"""What `kernlock remove SPEC…` drops from the project's sources, as `uv remove` does.

Without a group, a spec is dropped from `[tool.kernlock] kernels` (else
`[tool.kernels.dependencies]`, else `recorded`) and from every `[tool.kernlock.groups]` group that
lists it, so its kernel leaves the lock; with `group` (`uv remove --group`), from that group only.
A spec matches by its text or its lock identity (`org/repo@v1`), or, when only one spec of the
list names the repo, by `org/repo`. A group emptied stays declared (`training = []`): jobs that
choose it keep working. An override of a repo nothing declares any more is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from kernlock._internal.project.config import Project
from kernlock._internal.project.suggest import close_name, known_list
from kernlock._internal.spec.kernel_spec import parse_spec
from kernlock.errors import UsageError

# the command that removes these specs (from this group): a fix names it
Rerun = Callable[[Iterable[str], "str | None"], str]


def _matching(text: str, declared: Iterable[str]) -> list[str]:
    """The specs of `declared` that `text` names."""
    declared = list(dict.fromkeys(declared))
    wanted = parse_spec(text)
    found = [k for k in declared if k == text or parse_spec(k).key in (wanted.key, text)]
    if not found and wanted.key == wanted.repo:
        found = [k for k in declared if parse_spec(k).repo == wanted.repo]
    return found


def _one(text: str, declared: Iterable[str], where: str, rerun: Rerun, group: str | None) -> str:
    """The one spec of `declared` that `text` names ('' for none); naming several is an error."""
    found = _matching(text, declared)
    if len(found) > 1:
        raise UsageError(
            f"{text} matches {', '.join(found)} in {where}",
            fix=f"name one of them: `{rerun((found[0],), group)}`",
        )
    return found[0] if found else ""


def _drop_ungrouped(
    text: str,
    kernels: list[str],
    dependencies: dict[str, Any],
    recorded: list[str],
    removed: dict[str, list[str]],
    rerun: Rerun,
) -> bool:
    """Drop `text` from `kernels`, else `dependencies`, else `recorded`; whether it was there."""
    if declared := _one(text, kernels, "[tool.kernlock] kernels", rerun, None):
        kernels.remove(declared)
        removed["kernels"].append(declared)
    elif (repo := parse_spec(text).repo) in dependencies:
        del dependencies[repo]
        removed["dependencies"].append(repo)
    elif matched := _matching(text, recorded):
        recorded.remove(matched[0])
        removed["recorded"].append(matched[0])
    else:
        return False
    return True


def removal(
    project: Project, specs: Iterable[str], group: str | None, rerun: Rerun
) -> tuple[Project, dict[str, list[str]]]:
    """`project` without `specs`, and what to drop from `pyproject.toml` (`edit_pyproject`'s
    `removals`: `kernels`, `recorded`, `dependencies`, `overrides`, `groups.NAME`)."""
    specs = tuple(specs)
    kernels, recorded = list(project.kernels), list(project.recorded)
    dependencies = dict(project.kernel_dependencies)
    groups = {name: list(members) for name, members in project.groups}
    if group is not None and group not in groups:
        raise _unknown_group(group, groups, specs, rerun)
    removed: dict[str, list[str]] = {"kernels": [], "dependencies": [], "recorded": []}
    for text in specs:
        found = group is None and _drop_ungrouped(
            text, kernels, dependencies, recorded, removed, rerun
        )
        for name in (group,) if group is not None else tuple(groups):
            where = f"[tool.kernlock.groups] {name}"
            if member := _one(text, groups[name], where, rerun, group):
                groups[name] = [m for m in groups[name] if m != member]
                removed.setdefault(f"groups.{name}", []).append(member)
                found = True
        if not found:
            raise _not_declared(text, project, group, rerun)
    listed = (*kernels, *recorded, *(m for members in groups.values() for m in members))
    still = {parse_spec(k).repo for k in listed} | set(dependencies)
    dropped = (*removed["kernels"], *removed["recorded"])
    dropped += tuple(m for key, ms in removed.items() if key.startswith("groups.") for m in ms)
    gone = {parse_spec(k).repo for k in dropped} | set(removed["dependencies"])
    removed["overrides"] = sorted(gone - still)
    edited = replace(
        project,
        kernels=tuple(kernels),
        recorded=tuple(recorded),
        kernel_dependencies=tuple(dependencies.items()),
        overrides=tuple(r for r in project.overrides if r.repo not in removed["overrides"]),
        groups=tuple((name, tuple(members)) for name, members in groups.items()),
    )
    return edited, removed


def _unknown_group(
    group: str, groups: dict[str, list[str]], specs: tuple[str, ...], rerun: Rerun
) -> UsageError:
    match = close_name(group, groups)
    known = f"groups of [tool.kernlock.groups]: {known_list(groups)}"
    return UsageError(
        f"unknown group {group!r}" + (f" (did you mean {match}?)" if match else f" ({known})"),
        fix=f"run `{rerun(specs, match)}`"
        if match
        else f"run `{rerun(specs, None)}` (it removes them wherever they are declared)"
        if not groups
        else f"choose one of the {known}",
    )


def _not_declared(text: str, project: Project, group: str | None, rerun: Rerun) -> UsageError:
    """The error for a spec the project (or `group`) does not declare, with where it is instead."""
    ungrouped = [*project.kernels, *(repo for repo, _ in project.kernel_dependencies)]
    ungrouped += project.recorded
    if group is None:
        named = [*ungrouped, *(m for _, members in project.groups for m in members)]
        return UsageError(
            f"{text} is not declared in {project.pyproject.name} (declared: "
            f"{', '.join(dict.fromkeys(named)) or 'none'})",
            fix="name a declared spec; specs found by [tool.kernlock] scan are removed from the "
            "scanned files",
        )
    members = dict(project.groups)[group]
    elsewhere = [name for name, specs in project.groups if _matching(text, specs)]
    return UsageError(
        f"{text} is not in [tool.kernlock.groups] {group} ({group}: "
        f"{', '.join(members) or 'none'})",
        fix=f"it is in group {elsewhere[0]}: run `{rerun((text,), elsewhere[0])}`"
        if elsewhere
        else f"it is declared ungrouped: run `{rerun((text,), None)}`"
        if _matching(text, ungrouped) or parse_spec(text).repo in dict(project.kernel_dependencies)
        else f"name one of group {group}'s specs",
    )
