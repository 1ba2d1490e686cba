"""`kernlock lock`: resolve kernel specs and write kernels.lock."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from kernlock._internal.cli.options import (
    fail,
    handle_errors,
    json_option,
    lock_options,
    quiet_option,
    targets_option,
)
from kernlock._internal.wording import plural

if TYPE_CHECKING:
    from kernlock._internal.resolve.changes import LockResult


def progress_line() -> Callable[[str], None] | None:
    """A one-line progress indicator on a TTY, nothing otherwise."""
    if not sys.stderr.isatty():
        return None
    width = [0]

    def show(message: str) -> None:
        text = message[:100]
        click.echo("\r" + text.ljust(width[0]), err=True, nl=False)
        width[0] = len(text)

    return show


class _LockCommand(click.Command):
    """`kernlock lock`, whose arguments after `--` are the command `--record` runs."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            ctx.meta[_RECORDED_COMMAND] = tuple(args[at + 1 :])
            args = args[:at]
        return super().parse_args(ctx, args)


_RECORDED_COMMAND = "kernlock.lock.record"


@click.command("lock", cls=_LockCommand)
@click.argument("specs", nargs=-1)
@targets_option("Environment to cover, e.g. torch2.9-cxx11-cu128-x86_64-linux (repeatable).")
@click.option(
    "--scan",
    multiple=True,
    metavar="PATH",
    help="Find attn_implementation values in these files or directories (repeatable).",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="MODEL",
    help="A model the project trains (a directory or Hub model id): lock the layer kernels "
    "Transformers' default kernelize loads for it on the targets' GPUs (repeatable).",
)
@click.option(
    "--upgrade",
    "-U",
    is_flag=True,
    help="Re-resolve every kernel instead of keeping existing pins.",
)
@click.option(
    "--upgrade-kernel",
    "-P",
    "upgrade_kernels",
    multiple=True,
    metavar="REPO",
    help="Re-resolve only this repo (repeatable).",
)
@click.option(
    "--all-variants",
    is_flag=True,
    help="Lock every build variant at each commit, not only the targets'.",
)
@click.option(
    "--trust",
    multiple=True,
    metavar="REPO",
    help="Allow this repo from an untrusted publisher (repeatable).",
)
@click.option(
    "--migrate",
    is_flag=True,
    help="Convert kernels' own JSON kernels.lock: keep its commits as pins, keep the JSON as "
    "kernels.lock.json.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 when this re-lock would change the lock (like `uv lock --check`); "
    "existing pins are kept, not re-checked against the Hub (that is `verify --remote`).",
)
@click.option(
    "--record",
    is_flag=True,
    help="Run the command after `--` once (`kernlock lock --record -- python train.py`) and lock "
    "every kernel it loads too, as [tool.kernlock] recorded; nothing is written unless it exits "
    "with status 0.",
)
@click.option(
    "--exclude-newer",
    metavar="DATE|DURATION",
    help="Skip Hub commits newer than this (a date, or a duration back from now such as "
    '"7 days" or P7D); replaces [tool.kernlock] exclude-newer and exclude-newer-kernel.',
)
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@quiet_option
@lock_options
@json_option("Print a machine-readable summary.")
@handle_errors
def lock_command(dry_run: bool, record: bool, quiet: bool, as_json: bool, **options: Any) -> None:
    """Resolve kernel specs and write kernels.lock.

    SPECS, --target, --scan and --model values are added to [tool.kernlock] in pyproject.toml,
    like `uv add`, so later runs and `kernlock verify` see them.
    """
    from kernlock._internal.resolve.relock import lock_request
    from kernlock._internal.resolve.request import LockRequest, Mode
    from kernlock._internal.rules.coverage import uncovered_machine

    command = click.get_current_context().meta.get(_RECORDED_COMMAND, ())
    if record and not command:
        fail("--record needs the command to run: `kernlock lock --record -- CMD…`", 2)
    if not record:
        options["specs"] = (*options["specs"], *command)  # `kernlock lock -- SPEC…`
    # every other option of the command, by its name
    mode: Mode = "check" if options.pop("check") else "dry-run" if dry_run else "write"
    request = LockRequest(mode=mode, record=command if record else (), **options)
    recorded: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if request.record:
        from kernlock._internal.runtime.record_run import record_command

        recorded, notes = record_command(request.record)
    progress = progress_line()
    try:
        result = lock_request(request, recorded=recorded, notes=notes, progress=progress)
    finally:
        clear_progress(progress)
    checking = request.mode == "check"
    uncovered = None if checking or request.targets else uncovered_machine(result.lock)
    if uncovered is not None and not as_json:
        report(result, as_json, quiet)
    if uncovered is not None:  # a plain `lock` covers this machine or says it does not (exit 1)
        from kernlock.errors import NoVariantError

        done = f"wrote {result.path}" if result.written else f"left {result.path} as it was"
        raise NoVariantError(f"{done}, but {uncovered[0]}", fix=uncovered[1])
    report(result, as_json, quiet or checking)


def clear_progress(progress: Callable[[str], None] | None) -> None:
    """Erase the progress line (before a result or an error is printed)."""
    if progress:
        click.echo("\r" + " " * 100 + "\r", err=True, nl=False)


def report(result: LockResult, as_json: bool, quiet: bool = False) -> None:
    """Print what `lock()`/`remove()` did: warnings on stderr, then the lock, each change and a
    summary (or JSON)."""
    if result.migrated:
        click.echo(f"kernlock: {result.migrated}", err=True)
    for warning in result.warnings:
        click.echo(f"kernlock: warning: {warning}", err=True)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "lockfile": str(result.path),
                    "written": result.written,
                    "changed": result.changed,
                    "added": list(result.added),
                    "removed": list(result.removed),
                    "updated": list(result.updated),
                    "changes": [change.to_dict() for change in result.changes],
                    "warnings": list(result.warnings),
                    "migrated": result.migrated,
                    "lock": result.lock.to_dict(),
                },
                indent=2,
            )
        )
        return
    if quiet:
        return
    for kernel in result.lock.kernels:
        ref = kernel.ref or "commit"
        click.echo(f"{kernel.spec}  → {ref} → {kernel.commit[:12]}  ({kernel.resolution})")
        for variant in kernel.variants:
            for target in variant.targets:
                click.echo(f"    {target}: {variant.name}")
    if result.changes:
        click.echo("changes:")
    for change in result.changes:
        click.echo(f"  {change.describe('  ')}")
    state = "wrote" if result.written else "would write" if result.changed else "unchanged:"
    added, removed = (
        sum(c.old is None for c in result.changes),
        sum(c.new is None for c in result.changes),
    )
    counts = (
        (added, "added"),
        (len(result.changes) - added - removed, "updated"),
        (removed, "removed"),
    )
    changes = ", ".join(f"{n} {label}" for n, label in counts if n)
    click.echo(
        f"{state} {result.path} ({plural(len(result.lock.kernels), 'kernel')}, "
        f"{plural(len(result.lock.targets), 'target')}{', ' + changes if changes else ''})"
    )
