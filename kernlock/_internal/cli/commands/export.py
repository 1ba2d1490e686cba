"""`kernlock export`: kernels.lock in kernels' own JSON lock format, or as a CycloneDX SBOM."""

from __future__ import annotations

import click

from kernlock._internal.cli.options import handle_errors, lock_options


@click.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["kernels", "cyclonedx"]),
    default="kernels",
    show_default=True,
    help="Output format: kernels' JSON lock (for get_locked_kernel / load_kernel), or a "
    "CycloneDX 1.6 SBOM (JSON) of every locked variant and file.",
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
    pin is written).

    `--format cyclonedx` writes a CycloneDX SBOM (needs the `sbom` extra, cyclonedx-python-lib):
    one component per locked variant, purl pkg:huggingface/ORG/REPO@COMMIT?repo_type=kernel,
    with every file's sha256, the variant, targets and GPU archs, the signer the lock records and
    the license of the cached metadata.json. Offline: it reads the lock and the Hub cache only.

    Export never writes over kernlock's lock or a file of another format; use e.g.
    -o kernels.lock.json or -o kernels.cdx.json.
    """
    from pathlib import Path

    if fmt == "cyclonedx":
        _export_cyclonedx(output, lockfile, project_dir)
        return
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
    export_kernels_json(lock, workspace.lock_path, Path(output))
    click.echo(f"wrote {output} ({len(entries)} kernels, kernels format)", err=True)


def _export_cyclonedx(output: str | None, lockfile: str | None, project_dir: str) -> None:
    from pathlib import Path

    from kernlock._internal.lockfile.cyclonedx import SUFFIX, cyclonedx_json, looks_like_cyclonedx
    from kernlock._internal.lockfile.export_output import write_export
    from kernlock._internal.project.workspace import open_workspace
    from kernlock._internal.store.metadata import cached_license

    workspace = open_workspace(project_dir, lockfile)
    lock = workspace.read_lock()
    text = cyclonedx_json(lock, cached_license)
    if output is None:
        click.echo(text)
        return
    write_export(
        (text + "\n").encode("utf-8"),
        workspace.lock_path,
        Path(output),
        kind="a CycloneDX SBOM",
        is_kind=looks_like_cyclonedx,
        example=f"{workspace.lock_path.stem}{SUFFIX}",
    )
    count = sum(len(k.variants) for k in lock.kernels)
    click.echo(f"wrote {output} ({count} variants, CycloneDX 1.6)", err=True)
