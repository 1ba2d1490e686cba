"""`kernlock outdated`: locked kernels whose branch moved or that have a newer version branch."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from kernlock._internal.cli.commands.show import table
from kernlock._internal.cli.options import handle_errors, json_option, lock_options

if TYPE_CHECKING:
    from kernlock._internal.lockfile.entries import Lockfile
    from kernlock._internal.project.config import Project
    from kernlock._internal.spec.advisories import Advisory
    from kernlock._internal.verify.remote import KernelStatus


@click.command("outdated")
@lock_options
@json_option()
@click.option("--all", "show_all", is_flag=True, help="List up-to-date kernels too.")
@click.option(
    "--exit-code", is_flag=True, help="Exit 1 when a locked kernel can be updated (for CI)."
)
@click.option(
    "--exclude-newer",
    metavar="DATE|DURATION",
    help="Hold back Hub commits newer than this (a date, or a duration back from now such as "
    '"7 days" or P7D), as `kernlock lock --exclude-newer` would; replaces [tool.kernlock] '
    "exclude-newer and exclude-newer-kernel.",
)
@handle_errors
def outdated_command(
    lockfile: str | None,
    project_dir: str,
    as_json: bool,
    show_all: bool,
    exit_code: bool,
    exclude_newer: str | None,
) -> None:
    """List locked kernels whose branch moved past the lock or that have a newer version with a
    build for their targets; under a cooldown (exclude-newer, counted again from now), a commit
    newer than the cut-off is held back, not an update."""
    import json

    from kernlock._internal.hub.client import Hub
    from kernlock._internal.project.workspace import open_workspace
    from kernlock._internal.resolve.cooldown import outdated_cooldown
    from kernlock._internal.verify.remote import kernel_statuses

    workspace = open_workspace(project_dir, lockfile)
    lock = workspace.read_lock()
    hub = Hub()
    cooldown, relock = outdated_cooldown(workspace.project, lock, exclude_newer, hub)
    statuses = kernel_statuses(lock, hub, inspect=True, cooldown=cooldown)
    advised = _advised(workspace.project, lock)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "spec": s.kernel.spec,
                        "repo": s.kernel.repo,
                        "ref": s.kernel.ref,
                        "locked": s.kernel.commit,
                        "override": s.kernel.override.when if s.kernel.override else None,
                        "current": s.current,
                        "moved": s.moved,
                        "rewritten": s.rewritten,
                        "ref_gone": s.ref_gone,
                        "version": s.kernel.version,
                        "latest_version": s.latest_version,
                        "newer_version": s.newer_version,
                        "usable_version": s.usable_version,
                        "unbuildable_versions": list(s.unbuildable),
                        "error": s.error,
                        "renamed_to": s.renamed_to,
                        "appended": list(s.appended),
                        "exclude_newer": s.cutoff,
                        "held_back": s.held_back,
                        "cooldown_commit": s.cooled,
                        "held_versions": list(s.held_versions),
                        "advisories": [
                            {
                                "id": a.id,
                                "variant": variant,
                                "summary": a.summary,
                                "fix": a.fix_text(s.kernel.repo),
                            }
                            for variant, a in advised.get(s.kernel.identity, [])
                        ],
                    }
                    for s in statuses
                ],
                indent=2,
            )
        )
    else:
        _print_table(statuses, show_all, advised, relock)
    failed = [s for s in statuses if s.error]
    if failed:  # not checked is not up to date: never exit 0 when the Hub could not be asked
        from kernlock._internal.cli.options import fail

        fail(
            f"{len(failed)} of {len(statuses)} locked kernels could not be checked "
            f"({failed[0].error}); fix: check the network, HF_ENDPOINT and HF_TOKEN, then run "
            "`kernlock outdated` again",
            1,
        )
    if exit_code and any(
        _actions(s, relock(s.kernel.repo)) or advised.get(s.kernel.identity) for s in statuses
    ):
        sys.exit(1)


def _actions(s: KernelStatus, fix: str) -> list[str]:
    """What can be done about an entry (empty: nothing to update); `fix` is the re-lock that
    takes it."""
    actions = []
    if s.error:
        actions.append(f"error: {s.error}")
    if s.rewritten:
        actions.append(
            f"{s.ref_kind} force-pushed (the locked commit is no longer in its history); review, "
            f"then {fix}"
        )
    elif s.moved and s.cooled and not s.held_back:
        actions.append(f"{s.ref_kind} moved to {_newer(s)}; a re-lock takes {s.cooled[:12]}: {fix}")
    elif s.moved and not s.held_back:
        actions.append(f"{s.ref_kind} moved; {fix}")
    if s.ref_gone:
        actions.append("ref deleted")
    if s.renamed_to:
        actions.append(f"renamed to {s.renamed_to}; update the spec")
    if s.usable_version is not None and not s.kernel.override:
        actions.append(
            f"v{s.usable_version} available; pin "
            f"{s.kernel.repo}@v{s.usable_version}{_unbuildable(s, above=s.usable_version)}"
        )
    return actions


def _newer(s: KernelStatus) -> str:
    """The moved branch's head, newer than the cooldown's cut-off."""
    return f"{str(s.current)[:12]}, newer than the exclude-newer cut-off {s.cutoff}"


def _notes(s: KernelStatus) -> list[str]:
    """What is worth knowing but needs no update: a move or a newer version the cooldown holds
    back, a newer version an override deliberately stays below, builds appended to the branch for
    targets the lock does not have."""
    notes = []
    if s.held_back:
        notes.append(f"{s.ref_kind} {s.kernel.ref} moved to {_newer(s)}: held back by the cooldown")
    held = [v for v in s.held_versions if s.usable_version is None or v > s.usable_version]
    if held:
        notes.append(
            f"{', '.join(f'v{v}' for v in held)} held back by the cooldown (no commit from before "
            f"the exclude-newer cut-off {s.cutoff} with a build for the targets)"
        )
    if s.usable_version is not None and s.kernel.override:
        notes.append(
            f"v{s.usable_version} available; the override pins {s.kernel.override.use} "
            "([tool.kernlock.overrides])"
        )
    if s.appended:
        from kernlock._internal.hub.variants import variant_target

        adds = [t for name in s.appended if (t := variant_target(name)) is not None]
        how = f" (add one: kernlock lock --target {adds[0]})" if adds else ""
        notes.append(
            f"builds appended to {s.kernel.ref} for targets the lock does not have: "
            f"{', '.join(s.appended)}{how}"
        )
    return notes


def _unbuildable(s: KernelStatus, above: int = -1) -> str:
    """` (v3, v4 have no build for T)` for the newer versions skipped above `above`, else empty."""
    skipped = [v for v in s.unbuildable if v > above]
    if not skipped:
        return ""
    targets = sorted({str(t) for variant in s.kernel.variants for t in variant.targets})
    verb = "has" if len(skipped) == 1 else "have"
    return f" ({', '.join(f'v{v}' for v in skipped)} {verb} no build for {', '.join(targets)})"


def _advised(project: Project, lock: Lockfile) -> dict[tuple[str, str], list[tuple[str, Advisory]]]:
    """Per lock entry: its variants an advisory of the project covers, with the advisory."""
    from kernlock._internal.project.advisory_sources import project_advisories
    from kernlock._internal.verify.advisories import lock_advisories

    advised: dict[tuple[str, str], list[tuple[str, Advisory]]] = {}
    if project.advisories:
        for kernel, variant, advisory, _ in lock_advisories(lock, project_advisories(project)[0]):
            if advisory is not None:
                advised.setdefault(kernel.identity, []).append((variant.name, advisory))
    return advised


def _print_table(
    statuses: list[KernelStatus],
    show_all: bool,
    advised: dict[tuple[str, str], list[tuple[str, Advisory]]],
    relock: Callable[[str], str],
) -> None:
    """One row per lock entry (an override's entry named with the targets it applies to)."""
    rows = [["KERNEL", "REF", "LOCKED", "CURRENT", "LATEST", "STATUS"]]
    for s in statuses:
        states = [
            f"{variant} advised by {a.id}; fix: {a.fix_text(s.kernel.repo)} (kernlock lock re-pins "
            "it)"
            for variant, a in advised.get(s.kernel.identity, [])
        ]
        states += _actions(s, relock(s.kernel.repo)) + _notes(s)
        if not states and not show_all:
            continue
        name = f"{s.kernel.spec} [{s.kernel.override.when}]" if s.kernel.override else s.kernel.spec
        rows.append(
            [
                name,
                s.kernel.ref or "-",
                s.kernel.commit[:12],
                s.current[:12] if s.current else "-",
                f"v{s.latest_version}" if s.latest_version is not None else "-",
                "; ".join(states) or f"up to date{_unbuildable(s)}",
            ]
        )
    click.echo(table(rows) if len(rows) > 1 else "every locked kernel is up to date")
