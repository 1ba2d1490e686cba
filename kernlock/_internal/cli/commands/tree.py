"""`kernlock tree`: every lock entry, per target, under what brought it in."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from kernlock._internal.cli.options import (
    group_option,
    handle_errors,
    json_option,
    lock_options,
    targets_option,
)

if TYPE_CHECKING:
    from kernlock._internal.project.lock_sources import Traced


def traced_lock(
    project_dir: str, lockfile: str | None, groups: tuple[str, ...] = ()
) -> tuple[str, tuple[str, ...], list[Traced]]:
    """The lock's path, its declared groups and its entries (only the ungrouped and those of
    `groups`, when any is chosen) traced to their sources (no network)."""
    from kernlock._internal.project.groups import select_groups
    from kernlock._internal.project.lock_sources import trace
    from kernlock._internal.project.workspace import open_workspace

    workspace = open_workspace(project_dir, lockfile)
    lock = workspace.read_lock()
    chosen = select_groups(lock, groups, "tree")
    return str(workspace.lock_path), lock.groups, trace(workspace.project, chosen)


def entry_lines(traced: Traced, target: str | None = None) -> list[str]:
    """An entry's line (its pin, the variant `target` gets and its groups, as `uv tree` marks a
    group's packages) and one indented line per source."""
    k = traced.kernel
    name = f"{k.spec} [{k.override.when}]" if k.override else k.spec
    variant = k.variant_for(target) if target else None
    native = k.native_reason(target) if target else None
    built = f"  {variant.name}" if variant else f"  native here ({native})" if native else ""
    grouped = (
        f"  (group{'s' if len(k.groups) > 1 else ''}: {', '.join(k.groups)})" if k.groups else ""
    )
    head = f"{name}  {k.ref or 'commit'} -> {k.commit[:12]}{built}{grouped}"
    return [head, *(f"  <- {source.describe()}" for source in traced.sources)]


@click.command("tree")
@targets_option("Only this locked target (repeatable; default: every locked target).")
@group_option(
    "Only the ungrouped entries and those of this [tool.kernlock.groups] group (repeatable; "
    "default: every entry)."
)
@lock_options
@json_option("Print every entry with its targets and sources.")
@handle_errors
def tree_command(
    targets: tuple[str, ...],
    groups: tuple[str, ...],
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
) -> None:
    """Show every locked kernel, per target, under what brought it in: a spec in pyproject.toml, a
    --scan finding (file:line), a model and its Transformers mapping row, a call site, an
    override, a kernel's kernel-depends, a group; each entry marked with its groups. Reads the
    project and the lock; no network."""
    import json

    from kernlock._internal.spec.target import parse_target

    path, declared, entries = traced_lock(project_dir, lockfile, groups)
    wanted = sorted({str(parse_target(t)) for t in targets}) or sorted(
        {t for e in entries for t in e.targets}
    )
    if as_json:
        shown = [e for e in entries if not targets or set(e.targets) & set(wanted)]
        click.echo(
            json.dumps(
                {
                    "lockfile": path,
                    "targets": wanted,
                    "groups": list(declared),
                    "kernels": [e.to_dict() for e in shown],
                },
                indent=2,
            )
        )
        return
    for target in wanted:
        click.echo(target)
        for traced in (e for e in entries if target in e.targets):
            click.echo("\n".join(f"  {line}" for line in entry_lines(traced, target)))
    unserved = [e for e in entries if not e.targets]
    if unserved and not targets:
        click.echo("(no locked target)")
        for traced in unserved:
            click.echo("\n".join(f"  {line}" for line in entry_lines(traced)))
