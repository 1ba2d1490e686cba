"""`kernlock outdated`: locked kernels whose branch moved or that have a newer version branch."""

from __future__ import annotations

import click

from kernlock.commands.options import handle_errors, json_option, lock_options
from kernlock.commands.show import table


@click.command("outdated")
@lock_options
@json_option()
@click.option("--all", "show_all", is_flag=True, help="List up-to-date kernels too.")
@handle_errors
def outdated_command(lockfile: str | None, project_dir: str, as_json: bool, show_all: bool) -> None:
    """List locked kernels whose branch moved past the lock or that have a newer version (informational)."""
    import json

    from kernlock.remote import kernel_statuses
    from kernlock.workspace import open_workspace

    lock = open_workspace(project_dir, lockfile).read_lock()
    statuses = kernel_statuses(lock)
    if as_json:
        click.echo(json.dumps([
            {
                "spec": s.kernel.spec, "repo": s.kernel.repo, "ref": s.kernel.ref, "locked": s.kernel.commit,
                "current": s.current, "moved": s.moved, "ref_gone": s.ref_gone, "version": s.kernel.version,
                "latest_version": s.latest_version, "newer_version": s.newer_version, "error": s.error,
                "renamed_to": s.renamed_to,
            }
            for s in statuses
        ], indent=2))
        return
    rows = [["KERNEL", "REF", "LOCKED", "CURRENT", "LATEST", "STATUS"]]
    for s in statuses:
        states = []
        if s.error:
            states.append(f"error: {s.error}")
        if s.moved:
            states.append(f"{s.ref_kind} moved; kernlock lock -P {s.kernel.repo}")
        if s.ref_gone:
            states.append("ref deleted")
        if s.renamed_to:
            states.append(f"renamed to {s.renamed_to}; update the spec")
        if s.newer_version is not None:
            states.append(f"v{s.newer_version} available; pin {s.kernel.repo}@v{s.newer_version}")
        if not states and not show_all:
            continue
        rows.append([
            s.kernel.spec, s.kernel.ref or "-", s.kernel.commit[:12], s.current[:12] if s.current else "-",
            f"v{s.latest_version}" if s.latest_version is not None else "-", "; ".join(states) or "up to date",
        ])
    click.echo(table(rows) if len(rows) > 1 else "every locked kernel is up to date")
