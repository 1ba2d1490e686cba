"""`kernlock verify`: check kernels.lock is valid, fresh, covers the targets, and (opt-in) cached
and on the Hub."""

from __future__ import annotations

import click

from kernlock._internal.cli.options import (
    all_targets_option,
    group_option,
    handle_errors,
    json_option,
    lock_options,
    targets_option,
)


@click.command("verify")
@targets_option("Check coverage of this environment instead of the current one (repeatable).")
@all_targets_option
@click.option(
    "--cache",
    is_flag=True,
    help="Also check the locked variants are in the local Hub cache and match their hashes.",
)
@click.option(
    "--signatures",
    is_flag=True,
    help="Also re-verify the cached signed variants' Sigstore bundles against the "
    "lock's signers and the pinned trust root, offline.",
)
@click.option(
    "--remote",
    is_flag=True,
    help="Also check the lock against the Hub: every locked commit exists and holds "
    "exactly the locked files with their sizes and sha256 (catching a hand-edited lock), signed "
    "bundles still verify; report moved branches.",
)
@click.option(
    "--against",
    metavar="CHECKPOINT",
    type=click.Path(),
    help="Also check the lock loads exactly what this checkpoint's run recorded (its "
    "kernlock.json).",
)
@group_option(
    "Check only the ungrouped entries and those of this [tool.kernlock.groups] group (repeatable; "
    "freshness still covers the whole lock)."
)
@lock_options
@json_option("Print a machine-readable report (schema in kernlock._internal.verify.report).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
    help="Report format: text, JSON (as --json), or SARIF 2.1.0 for code-scanning pipelines "
    "(stable rule ids, locations in kernels.lock and pyproject.toml).",
)
@handle_errors
def verify_command(
    targets: tuple[str, ...],
    all_targets: bool,
    cache: bool,
    signatures: bool,
    remote: bool,
    against: str | None,
    groups: tuple[str, ...],
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
    fmt: str,
) -> None:
    """Check kernels.lock without resolving anything.

    Offline unless --remote: the lock parses and validates, is fresh against the
    project's sources and covers the targets. A commit, sha256 or file list edited
    by hand in the lock is caught only by --remote, which compares it with the Hub.

    Exit 0 when every check passes, 1 when one fails, 2 for bad usage or an unreadable lock,
    whatever the format.
    """
    import sys

    from kernlock._internal.verify.checks import verify
    from kernlock._internal.verify.report import report_json
    from kernlock.errors import UsageError

    if as_json and fmt not in ("text", "json"):
        raise UsageError(
            f"--json and --format {fmt} ask for two formats", fix=f"drop --json: --format {fmt}"
        )

    report = verify(
        project_dir,
        targets=targets,
        all_targets=all_targets,
        cache=cache,
        signatures=signatures,
        remote=remote,
        lockfile=lockfile,
        against=against,
        groups=groups,
    )
    if fmt == "sarif":
        from kernlock._internal.verify.sarif import sarif_json

        click.echo(sarif_json(report))
    else:
        click.echo(report_json(report) if as_json or fmt == "json" else report.format())
    sys.exit(report.exit_code)
