"""`kernlock export`: kernels.lock in kernels' own JSON lock format."""

from __future__ import annotations

import click

from kernlock._internal.cli.options import handle_errors, lock_options


@click.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["kernels"]),
    default="kernels",
    show_default=True,
    help="Output format: kernels' JSON lock (for get_locked_kernel / load_kernel).",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of standard output."
)
@lock_options
@handle_errors
def export_command(fmt: str, output: str | None, lockfile: str | None, project_dir: str) -> None:
    """Export the lock for another tool.

    `--format kernels` writes the JSON that kernels.get_locked_kernel(repo, lockfile=...)
    and kernels.load_kernel(repo, lockfile=...) read: each locked kernel pinned to its commit.
    It has no targets, so a per-target override is left out, with a warning (the spec's own
    pin is written). It never writes over kernlock's lock; use e.g. -o kernels.lock.json.
    """
    from pathlib import Path

    from kernlock._internal.lockfile.kernels_json import (
        export_kernels_json,
        exported_entries,
        kernels_json,
    )
    from kernlock._internal.project.workspace import open_workspace

    workspace = open_workspace(project_dir, lockfile)
    lock = workspace.read_lock()
    entries, warnings = exported_entries(lock)
    for warning in warnings:
        click.echo(f"kernlock: warning: {warning}", err=True)
    if output is None:
        click.echo(kernels_json(lock))
        return
    export_kernels_json(lock, workspace.lockfile, Path(output))
    click.echo(f"wrote {output} ({len(entries)} kernels, kernels format)", err=True)
