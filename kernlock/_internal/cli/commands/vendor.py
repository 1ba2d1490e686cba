"""`kernlock vendor DIR`: export the locked variants for an air-gapped cluster."""

from __future__ import annotations

import json

import click

from kernlock._internal.cli.options import handle_errors, json_option, lock_options, targets_option


@click.command("vendor")
@click.argument("directory", type=click.Path(file_okay=False))
@targets_option(
    "Export only this target's variants (repeatable; default: every target, as --all-targets)."
)
@click.option(
    "--repair",
    is_flag=True,
    help="Copy again the variants already in DIRECTORY that do not match the lock.",
)
@lock_options
@json_option()
@handle_errors
def vendor_command(
    directory: str,
    targets: tuple[str, ...],
    repair: bool,
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
) -> None:
    """Copy the locked variants and the lock into DIRECTORY.

    Then run with KERNLOCK_VENDOR_DIR=DIRECTORY: no Hub and no Hub cache needed.
    """
    from huggingface_hub.utils import disable_progress_bars

    from kernlock._internal.fetch.vendor import vendor

    disable_progress_bars()  # our own progress line (or none) instead of one bar per file

    report = vendor(directory, project_dir, targets=targets, lockfile=lockfile, repair=repair)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    repaired = f", {report.repaired} repaired" if report.repaired else ""
    click.echo(
        f"vendored {report.variants} variants ({report.files} files, {report.bytes} "
        f"bytes{repaired}) into {report.directory}; use it with "
        f"KERNLOCK_VENDOR_DIR={report.directory.resolve()}"
    )
