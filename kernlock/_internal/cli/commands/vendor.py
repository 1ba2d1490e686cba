"""`kernlock vendor DIR`: export the locked variants for an air-gapped cluster."""

from __future__ import annotations

import json

import click

from kernlock._internal.cli.options import (
    fail,
    group_option,
    handle_errors,
    json_option,
    lock_options,
    targets_option,
)


@click.command("vendor")
@click.argument("directory", type=click.Path(file_okay=False), required=False)
@click.option(
    "--to",
    "destination",
    metavar="OCI",
    help="Push the locked variants as OCI artifacts instead, to oci://HOST/NAMESPACE/NAME[:TAG] "
    "(a registry; credentials from `docker login`/`oras login`) or oci-layout:DIR[:TAG], and "
    "record the pushed index's digest in the lock.",
)
@targets_option(
    "Export only this target's variants (repeatable; default: every target, as --all-targets)."
)
@click.option(
    "--repair",
    is_flag=True,
    help="Copy again the variants already in DIRECTORY that do not match the lock.",
)
@group_option(
    "Export (or push) only the ungrouped entries and those of this [tool.kernlock.groups] group "
    "(repeatable; the lock is copied whole)."
)
@lock_options
@json_option()
@handle_errors
def vendor_command(
    directory: str | None,
    destination: str | None,
    targets: tuple[str, ...],
    repair: bool,
    groups: tuple[str, ...],
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
) -> None:
    """Copy the locked variants and the lock into DIRECTORY, or push them with --to.

    Then run with KERNLOCK_VENDOR_DIR=DIRECTORY: no Hub and no Hub cache needed; after --to, pull
    with `kernlock sync --from` or KERNLOCK_MIRROR.
    """
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # our own progress line (or none) instead of one bar per file
    if (directory is None) == (destination is None):
        fail("name a DIRECTORY or --to OCI (one of them): `kernlock vendor DIR`", 2)
    if destination is not None:
        if repair:
            fail("--repair works on a vendor DIRECTORY; a push sends what the store lacks", 2)
        return _push(destination, targets, groups, lockfile, project_dir, as_json)
    assert directory is not None
    from kernlock._internal.fetch.vendor import vendor

    report = vendor(
        directory, project_dir, targets=targets, lockfile=lockfile, repair=repair, groups=groups
    )
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    repaired = f", {report.repaired} repaired" if report.repaired else ""
    click.echo(
        f"vendored {report.variants} variants ({report.files} files, {report.bytes} "
        f"bytes{repaired}) into {report.directory}; use it with "
        f"KERNLOCK_VENDOR_DIR={report.directory.resolve()}"
    )


def _push(
    destination: str,
    targets: tuple[str, ...],
    groups: tuple[str, ...],
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
) -> None:
    from kernlock._internal.fetch.oci_push import push

    report = push(destination, project_dir, targets=targets, lockfile=lockfile, groups=groups)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    click.echo(
        f"pushed {report.variants} variants ({report.files} files; {report.uploaded} blobs, "
        f"{report.bytes} bytes sent) to {report.location}; the lock records it: pull with "
        f"`kernlock sync --from {report.location}` or KERNLOCK_MIRROR={report.location}"
    )
