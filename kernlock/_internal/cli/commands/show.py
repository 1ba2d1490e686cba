"""`kernlock show`: what kernels.lock pins, as a table or as the lock itself in JSON."""

from __future__ import annotations

from typing import Any

import click

from kernlock._internal.cli.options import handle_errors, json_option, lock_options


def table(rows: list[list[str]]) -> str:
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip()
        for row in rows
    )


def signer_text(variant: Any) -> str:
    """Who signed a locked variant, as the lock records it (`signed by <build signer> (issuer,
    source, log entry)`)."""
    import datetime

    s = variant.signature
    if s is None:
        return (
            "signed, signer not recorded (lock format 1.0: re-lock to verify it)"
            if variant.signed
            else "unsigned"
        )
    source = (
        f"source {s.source_repository}" + (f" at {s.source_commit[:12]}" if s.source_commit else "")
        if s.source_repository
        else "no source repository"
    )
    when = datetime.datetime.fromtimestamp(s.integrated_time, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    return (
        f"signed by {s.build_signer} (issuer {s.issuer}, {source}, log index {s.log_index}, "
        f"integrated {when})"
    )


def provenance_lines(lock: Any) -> list[str]:
    """One line per locked variant: build provenance, digest and requirements from its metadata, and
    its signer."""
    lines = []
    for kernel in lock.kernels:
        for variant in kernel.variants:
            p = variant.provenance
            parts = []
            if p is not None:
                if p.source_commit:
                    parts.append(
                        f"source {p.source_commit[:12]}{' (dirty)' if p.source_dirty else ''}"
                    )
                if p.builder_version:
                    commit = f" {p.builder_commit[:12]}" if p.builder_commit else ""
                    parts.append(
                        "kernel-builder "
                        f"{p.builder_version}{commit}{' (dirty)' if p.builder_dirty else ''}"
                    )
            if variant.digest:
                parts.append(f"digest {variant.digest}")
            if variant.kernels_minver:
                parts.append(f"kernels>={variant.kernels_minver}")
            if variant.python_depends:
                parts.append(f"needs {', '.join(variant.python_depends)}")
            parts.append(signer_text(variant))
            lines.append(f"{kernel.spec} {variant.name}: {'; '.join(parts)}")
    return lines


@click.command("show")
@lock_options
@json_option()
@click.option(
    "--provenance",
    is_flag=True,
    help="Also show each variant's build provenance, digest, requirements and signer.",
)
@handle_errors
def show_command(lockfile: str | None, project_dir: str, as_json: bool, provenance: bool) -> None:
    """Show every locked kernel: spec, requested → ref → commit, variant per target."""
    import json

    from kernlock._internal.project.workspace import open_workspace

    lock = open_workspace(project_dir, lockfile).read_lock()
    if as_json:
        click.echo(json.dumps(lock.to_dict(), indent=2))  # the lock itself: kernels.lock's keys
        return
    rows = [["KERNEL", "PIN", *map(str, lock.targets)]]
    for kernel in lock.kernels:
        requested = ", ".join(r for r in kernel.requested if r != kernel.spec)
        pin = (
            f"{requested + ' → ' if requested else ''}{kernel.ref or 'commit'} → "
            f"{kernel.commit[:12]}"
        )
        spec = kernel.spec + (
            f" (dependency of {', '.join(kernel.dependency_of)})" if kernel.dependency_of else ""
        )
        if kernel.override is not None:
            spec += f" [override {kernel.override.when}: {kernel.override.reason}]"
        if kernel.aliases:
            spec += f" (also loaded as {', '.join(kernel.aliases)})"
        if kernel.devices:
            spec += f" (on {', '.join(kernel.devices)} only)"
        if kernel.source is not None:
            spec += f" ({kernel.source})"  # found by `kernlock lock --record`
        cells = []
        for target in lock.targets:
            variant = kernel.variant_for(target)
            native = kernel.native_reason(target)
            cells.append(variant.name if variant else f"native ({native})" if native else "-")
        rows.append([spec, pin, *cells])
    click.echo(table(rows))
    used = [f"  {kernel.spec}: {line}" for kernel in lock.kernels for line in kernel.used_by]
    if used:
        click.echo("\nused by (the model layer or call site that loads it):")
        click.echo("\n".join(used))
    if provenance:
        click.echo("")
        click.echo("\n".join(provenance_lines(lock)))
