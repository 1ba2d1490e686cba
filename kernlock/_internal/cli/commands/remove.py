"""`kernlock remove SPEC…`: drop kernels from the project's sources and re-lock (like `uv
remove`)."""

from __future__ import annotations

import click

from kernlock._internal.cli.commands.lock import clear_progress, progress_line, report
from kernlock._internal.cli.options import handle_errors, json_option, lock_options


@click.command("remove")
@click.argument("specs", nargs=-1, required=True)
@click.option(
    "--group",
    metavar="GROUP",
    help="Remove SPECS from this [tool.kernlock.groups] group only (like `uv remove --group`).",
)
@lock_options
@json_option("Print a machine-readable summary.")
@handle_errors
def remove_command(
    specs: tuple[str, ...], group: str | None, lockfile: str | None, project_dir: str, as_json: bool
) -> None:
    """Remove SPECS from [tool.kernlock] kernels or recorded (or [tool.kernels.dependencies]) and
    from every [tool.kernlock.groups] group (--group: from that group only), and re-lock, keeping
    other pins."""
    from kernlock._internal.resolve.relock import remove

    progress = progress_line()
    try:
        result = remove(project_dir, specs, lockfile=lockfile, progress=progress, group=group)
    finally:
        clear_progress(progress)
    report(result, as_json)
