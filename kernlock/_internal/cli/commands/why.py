"""`kernlock why REPO`: what brought a locked kernel in."""

from __future__ import annotations

import click

from kernlock._internal.cli.commands.tree import entry_lines, traced_lock
from kernlock._internal.cli.options import handle_errors, json_option, lock_options, not_in_lock


@click.command("why")
@click.argument("repo")
@lock_options
@json_option("Print the entries with their targets and sources.")
@handle_errors
def why_command(repo: str, lockfile: str | None, project_dir: str, as_json: bool) -> None:
    """Say why REPO (org/repo or a locked spec) is in the lock: each of its entries, the targets it
    serves, its groups and every source that brought it in, like `uv tree --invert`. No
    network."""
    import json

    from kernlock._internal.project.suggest import close_name

    _, _, entries = traced_lock(project_dir, lockfile)
    found = [e for e in entries if repo in (*e.kernel.names(), e.kernel.spec)]
    if not found:
        names = {n for e in entries for n in (*e.kernel.names(), e.kernel.spec)}
        match = close_name(repo, names)
        raise not_in_lock(
            repo,
            "why",
            match,
            sorted({e.kernel.spec for e in entries}),
            "name a locked kernel (`kernlock show` lists them)",
        )
    if as_json:
        click.echo(json.dumps([e.to_dict() for e in found], indent=2))
        return
    for traced in found:
        lines = entry_lines(traced)
        click.echo(lines[0])
        click.echo(f"  targets: {', '.join(traced.targets) or 'none'}")
        click.echo("\n".join(lines[1:]))
