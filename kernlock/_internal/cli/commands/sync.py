"""`kernlock sync`: download and verify exactly the locked variants."""

from __future__ import annotations

import json
import sys

import click

from kernlock._internal.cli.options import (
    all_targets_option,
    group_option,
    handle_errors,
    json_option,
    lock_options,
    locked_option,
    targets_option,
)


@click.command("sync")
@targets_option("Sync the variants locked for this target (repeatable; default: this environment).")
@all_targets_option
@locked_option
@click.option(
    "--repair",
    is_flag=True,
    help="Re-download cached files that do not match the lock (files it does not list are "
    "reported, not deleted).",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Also list each entry a target does not load (another device type's, or native there).",
)
@click.option(
    "--from",
    "source",
    metavar="OCI",
    help="Pull from this OCI location instead of the Hub (oci://HOST/NAMESPACE/NAME[:TAG][@DIGEST] "
    "or oci-layout:DIR, as `kernlock vendor --to` pushed it; default: $KERNLOCK_MIRROR).",
)
@group_option(
    "Sync only the ungrouped entries and those of this [tool.kernlock.groups] group (repeatable; "
    "default: every entry)."
)
@lock_options
@json_option()
@handle_errors
def sync_command(
    targets: tuple[str, ...],
    all_targets: bool,
    locked: bool,
    repair: bool,
    verbose: bool,
    source: str | None,
    groups: tuple[str, ...],
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
) -> None:
    """Download the locked variants into the Hub cache and verify every file."""
    from huggingface_hub.utils import disable_progress_bars

    from kernlock._internal.fetch.sync import sync

    disable_progress_bars()  # our own progress line (or none) instead of one bar per file

    def progress(done: int, total: int) -> None:
        click.echo(f"\rsyncing variants {done}/{total}", err=True, nl=done == total)

    report = sync(
        project_dir,
        targets=targets,
        all_targets=all_targets,
        repair=repair,
        lockfile=lockfile,
        locked=locked,
        progress=progress if sys.stderr.isatty() else None,
        source=source,
        groups=groups,
    )
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    for line in report.skipped if verbose else ():
        click.echo(line)
    for line in report.unrooted:  # `hf cache prune` may delete these commits
        click.echo(f"kernlock: warning: {line}", err=True)
    fetched = [f"{len(report.downloaded)} downloaded"]
    if report.repaired:
        fetched.append(f"{len(report.repaired)} repaired")
    from kernlock._internal.wording import plural

    click.echo(
        f"synced into {report.cache}: {plural(report.variants, 'variant')}, "
        f"{plural(report.verified, 'file')} verified, {', '.join(fetched)} ({report.bytes} bytes "
        "fetched)"
    )
