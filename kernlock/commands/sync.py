"""`kernlock sync`: download and verify exactly the locked variants."""

from __future__ import annotations

import sys

import click

from kernlock.cli import handle_errors


@click.command("sync")
@click.option("--target", "targets", multiple=True, metavar="TARGET", help="Sync the variants locked for this target (repeatable; default: this environment).")
@click.option("--all-targets", is_flag=True, help="Sync the variants of every locked target.")
@click.option("--locked", is_flag=True, help="Fail unless the lock is fresh against the project's sources (like cargo --locked).")
@click.option("--repair", is_flag=True, help="Re-download cached files that do not match the lock.")
@click.option("--lockfile", type=click.Path(dir_okay=False), help="Lock file (default: the project's kernels.lock).")
@click.option("--project", "project_dir", default=".", type=click.Path(file_okay=False), help="Project directory.")
@handle_errors
def sync_command(targets: tuple[str, ...], all_targets: bool, locked: bool, repair: bool, lockfile: str | None, project_dir: str) -> None:
    """Download the locked variants into the Hub cache and verify every file."""
    from huggingface_hub.utils import disable_progress_bars

    from kernlock.sync import sync

    disable_progress_bars()  # our own progress line (or none) instead of one bar per file

    def progress(done: int, total: int) -> None:
        click.echo(f"\rsyncing variants {done}/{total}", err=True, nl=done == total)

    report = sync(project_dir, targets=targets, all_targets=all_targets, repair=repair, lockfile=lockfile, locked=locked,
                  progress=progress if sys.stderr.isatty() else None)
    fetched = [f"{len(report.downloaded)} downloaded"]
    if report.repaired:
        fetched.append(f"{len(report.repaired)} repaired")
    click.echo(f"synced into {report.cache}: {report.variants} variants, {report.verified} files verified, "
               f"{', '.join(fetched)} ({report.bytes} bytes fetched)")
