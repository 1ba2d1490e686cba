"""`kernlock remove SPEC…`: drop kernels from the project's sources and re-lock (like `uv remove`)."""

from __future__ import annotations

import click

from kernlock.cli import handle_errors
from kernlock.commands.lock import progress_line, report


@click.command("remove")
@click.argument("specs", nargs=-1, required=True)
@click.option("--lockfile", type=click.Path(dir_okay=False), help="Lock file path (default: kernels.lock in the project).")
@click.option("--project", "project_dir", default=".", type=click.Path(file_okay=False), help="Project directory.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@handle_errors
def remove_command(specs: tuple[str, ...], lockfile: str | None, project_dir: str, as_json: bool) -> None:
    """Remove SPECS from [tool.kernlock] kernels (or [tool.kernels.dependencies]) and re-lock, keeping other pins."""
    from kernlock.locking import remove

    progress = progress_line()
    report(remove(project_dir, specs, lockfile=lockfile, progress=progress), progress, as_json)
