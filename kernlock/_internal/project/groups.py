"""Groups of kernels (`[tool.kernlock.groups]`), as uv's dependency groups and conda-lock's
categories: a job that trains syncs, checks and binds only the kernels it needs.

    [tool.kernlock.groups]
    training = ["kernels-community/liger-kernels@v4"]
    inference = ["kernels-community/activation@v1"]

A group's specs are locked like any other spec, into the one lock: each entry they bring in records
them (`groups = ["training"]`), and the lock names every declared group (top-level `groups`). An
entry an ungrouped source brings in (`kernels`, `models`, `scan`, ...) records no group and belongs
to every run, as uv's `project.dependencies` do; a `kernel-depends` entry takes the groups of the
entries that depend on it. Choosing groups (`--group`, `apply(group=...)`, `$KERNLOCK_GROUPS`)
keeps the ungrouped entries and those of the chosen groups; choosing none keeps every entry (uv's
`default-groups = "all"`): a project that adds groups changes nothing for commands run without one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernlock._internal.lockfile.format_version import format_version
from kernlock._internal.project.suggest import close_name, known_list
from kernlock.errors import ConfigError, UnlockedKernelError, UsageError

if TYPE_CHECKING:
    from kernlock._internal.lockfile.entries import Lockfile
    from kernlock._internal.spec.kernel_spec import KernelSpec

Groups = tuple[tuple[str, tuple[str, ...]], ...]  # (name, its specs), as declared

GROUPS_FORMAT = "1.7"  # the lock format that holds `groups`
_NAME = re.compile(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?", re.IGNORECASE)  # PEP 735's group names


def parse_groups(table: Any, path: Path) -> Groups:
    """`[tool.kernlock.groups]`: group name -> its specs, in the order written."""
    if table is None:
        return ()
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}: [tool.kernlock.groups] is not a table",
            fix='write it as a [tool.kernlock.groups] table of name = ["org/repo@v1", ...]',
        )
    groups = []
    for name, specs in table.items():
        if not _NAME.fullmatch(name):
            raise ConfigError(
                f"{path}: [tool.kernlock.groups] {name!r} is not a group name",
                fix="name it with letters, digits, `-`, `_` and `.` (training, inference-gpu)",
            )
        if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
            raise ConfigError(
                f"{path}: [tool.kernlock.groups] {name} must be a list of spec strings",
                fix=f'write it as {name} = ["org/repo@v1", ...]',
            )
        groups.append((name, tuple(specs)))
    return tuple(groups)


def group_specs(groups: Groups, pyproject: str, lines: dict[str, int]) -> list[KernelSpec]:
    """Every group's specs, each with its origin in `pyproject` (its line, from `lines`)."""
    from kernlock._internal.spec.kernel_spec import Origin, parse_spec

    return [
        parse_spec(text, Origin(pyproject, lines.get(text)))
        for _, specs in groups
        for text in specs
    ]


def with_groups(
    lock: Lockfile, groups: Groups, grouped: list[KernelSpec], specs: Iterable[KernelSpec]
) -> Lockfile:
    """`lock` with every entry's groups and the declared group names (lock format 1.7); `lock` as it
    is when the project declares no group.

    `grouped` are `group_specs(groups, ...)`, `specs` all the specs the lock was resolved from (the
    grouped among them), aliases expanded alike: a key some spec brings in beyond the groups' is
    ungrouped.
    """
    if not groups:
        return lock
    names = [name for name, members in groups for _ in members]
    of: dict[str, set[str]] = {}
    for name, spec in zip(names, grouped, strict=True):
        of.setdefault(spec.key, set()).add(name)
    ungrouped = Counter(s.key for s in specs) - Counter(s.key for s in grouped)
    direct: dict[str, set[str] | None] = {
        key: set() if ungrouped[key] else of.get(key) for key in {s.key for s in specs}
    }
    entry = {k.spec: direct.get(k.spec) for k in lock.kernels}  # None: no source names it
    for _ in lock.kernels:  # a dependency is in its own groups and its dependents' (chains: passes)
        for kernel in lock.kernels:
            own = direct.get(kernel.spec)
            if kernel.dependency_of and own != set():
                found = [entry.get(spec) for spec in kernel.dependency_of]
                every = not all(found)  # a dependent of every run
                entry[kernel.spec] = (
                    set() if every else set(own or ()).union(*(g or () for g in found))
                )
    kernels = tuple(replace(k, groups=tuple(sorted(entry[k.spec] or ()))) for k in lock.kernels)
    version = max(lock.version, GROUPS_FORMAT, key=format_version)
    names_declared = tuple(sorted(name for name, _ in groups))
    return replace(lock, kernels=kernels, groups=names_declared, version=version)


def select_groups(
    lock: Lockfile, chosen: Iterable[str], rerun: str | Callable[[tuple[str, ...]], str]
) -> Lockfile:
    """`lock` with only its ungrouped entries and those of the `chosen` groups (`lock` itself when
    none is chosen); an unknown group is a `UsageError` whose fix is `rerun(groups)` (or, for a
    command and its arguments, `kernlock <rerun> --group ...`), with the group it most likely means
    in its place."""
    if isinstance(rerun, str):
        command = rerun
        rerun = lambda names: f"kernlock {command} {group_options(names)}"  # noqa: E731
    chosen = tuple(dict.fromkeys(chosen))
    if not chosen:
        return lock
    for name in chosen:
        if name not in lock.groups:
            match = close_name(name, lock.groups)
            known = f"groups of the lock: {known_list(lock.groups)}"
            raise UsageError(
                f"unknown group {name!r}"
                + (f" (did you mean {match}?)" if match else f" ({known})"),
                fix=f"run `{rerun(tuple(match if g == name else g for g in chosen))}`"
                if match
                else "declare it in [tool.kernlock.groups] and run `kernlock lock`"
                if not lock.groups
                else f"choose one of the {known}",
            )
    kernels = tuple(k for k in lock.kernels if not k.groups or set(k.groups) & set(chosen))
    return replace(lock, kernels=kernels)


def group_options(groups: Iterable[str]) -> str:
    """`groups` as command-line options: `--group training --group inference`."""
    return " ".join(f"--group {name}" for name in groups)


def group_of(lock: Lockfile, repo: str) -> str | None:
    """The groups that lock `repo` in `lock`, as text (`group inference`), if only groups do."""
    entries = lock.for_repo(repo)
    if not entries or any(not k.groups for k in entries):
        return None
    return _named({g for k in entries for g in k.groups})


def stale_groups(
    lock: Lockfile, groups: Groups, grouped: list[KernelSpec], specs: Iterable[KernelSpec]
) -> list[str]:
    """Where the lock's groups differ from what `[tool.kernlock.groups]` declares now (see
    `with_groups` for the arguments), one line each."""
    wanted = with_groups(replace(lock, groups=()), groups, grouped, specs)
    problems = []
    if tuple(wanted.groups) != tuple(lock.groups):
        problems.append(
            f"[tool.kernlock.groups] declares {_named(wanted.groups)}, the lock has "
            f"{_named(lock.groups)}"
        )
    for old, new in zip(lock.kernels, wanted.kernels, strict=True):
        if tuple(old.groups) != (new.groups if groups else ()):
            problems.append(
                f"{old.spec} is in {_named(new.groups if groups else ())} of "
                f"[tool.kernlock.groups], the lock has it in {_named(old.groups)}"
            )
    return problems


def _named(groups: Iterable[str]) -> str:
    names = sorted(groups)
    return f"group{'s' if len(names) > 1 else ''} {', '.join(names)}" if names else "no group"


def applied_groups(
    lock: Lockfile, group: str | Iterable[str] | None
) -> tuple[Lockfile, tuple[str, ...], tuple[tuple[str, str], ...]]:
    """What `apply(group=...)` binds: the selected lock, the groups chosen (`group`, else
    `$KERNLOCK_GROUPS`), and for each repo only unchosen groups lock, those groups."""
    from kernlock._internal.settings import GROUPS_ENV, groups_from_env

    if group is None:
        chosen = groups_from_env()
        selected = select_groups(
            lock, chosen, lambda names: f"export {GROUPS_ENV}={','.join(names)}"
        )
    else:
        chosen = (group,) if isinstance(group, str) else tuple(group)
        selected = select_groups(lock, chosen, lambda names: f"kernlock.apply(group={list(names)})")
    kept = {repo for k in selected.kernels for repo in k.names()}
    elsewhere = {repo: group_of(lock, repo) for k in lock.kernels for repo in k.names()}
    return (
        selected,
        tuple(dict.fromkeys(chosen)),
        tuple(
            (repo, where) for repo, where in sorted(elsewhere.items()) if where and repo not in kept
        ),
    )


def other_group(
    repo: str,
    what: str,
    path: Path,
    chosen: tuple[str, ...],
    elsewhere: tuple[tuple[str, str], ...],
) -> UnlockedKernelError | None:
    """The refusal of a load of `repo` that only unchosen groups lock (`elsewhere`, from
    `applied_groups`); None when it is not one."""
    where = dict(elsewhere).get(repo)
    if where is None:
        return None
    wanted = group_options((*chosen, where.split(" ", 1)[1].split(", ")[0]))
    return UnlockedKernelError(
        f"kernel {repo} ({what}) is locked in {path} for {where} only, and this run binds "
        f"{_named(chosen)}",
        fix=f"choose its group too: `kernlock run {wanted} -- …` (or kernlock.apply(group=[...]))",
    )
