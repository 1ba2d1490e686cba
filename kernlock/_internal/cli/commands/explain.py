"""`kernlock explain`: every variant at a locked commit with kernels' verdict for a target."""

from __future__ import annotations

from typing import Any

import click

from kernlock._internal.cli.options import (
    handle_errors,
    json_option,
    lock_options,
    not_in_lock,
    targets_option,
)


@click.command("explain")
@click.argument("repo")
@targets_option("Environment to explain (repeatable; default: the lock's targets).")
@lock_options
@json_option()
@handle_errors
def explain_command(
    repo: str, targets: tuple[str, ...], lockfile: str | None, project_dir: str, as_json: bool
) -> None:
    """Explain which build variant of REPO (org/repo or a locked spec) each target gets, and why the
    others do not fit.

    Uses kernels' own variant ranking against the variants listed in the lock; no network.
    """
    import json

    from kernlock._internal.hub.variants import choose_variant
    from kernlock._internal.lockfile.target_pins import is_target_pin
    from kernlock._internal.project.workspace import open_workspace
    from kernlock._internal.spec.target import parse_target

    lock = open_workspace(project_dir, lockfile).read_lock()
    kernels = [k for k in lock.kernels if repo in (*k.names(), k.spec)]
    if not kernels:
        from kernlock._internal.project.suggest import close_repo

        match = close_repo(repo.split("@", 1)[0], {k.repo for k in lock.kernels})
        raise not_in_lock(
            repo,
            "explain",
            match,
            [k.spec for k in lock.kernels],
            "name a locked kernel, or lock this one first (`kernlock lock REPO`)",
        )
    chosen_targets = [parse_target(t) for t in targets] or list(lock.targets)
    report: list[dict[str, Any]] = []
    for kernel in kernels:
        entry: dict[str, Any] = {
            "spec": kernel.spec,
            "commit": kernel.commit,
            "build_variants": list(kernel.build_variants),
            "targets": [],
            "ref": kernel.ref,
            "resolution": kernel.resolution,
            "override": kernel.override.to_dict() if kernel.override else None,
            "target_pin": is_target_pin(
                kernel.override
            ),  # a per-target pin kernlock made (its resolution says why)
            "devices": list(kernel.devices),
            "used_by": list(kernel.used_by),
        }
        # Each target under the entry covering it (an override's or the spec's own); an uncovered
        # one under the spec's own.
        shown = [
            t
            for t in chosen_targets
            if (lock.kernel(kernel.spec, t) or lock.kernel(kernel.spec)) is kernel
        ]
        if not shown and targets:
            continue
        for target in shown:
            choice, reasons = choose_variant(kernel.build_variants, target)
            locked = kernel.variant_for(target)
            entry["targets"].append(
                {
                    "target": str(target),
                    "kernels_choice": choice,
                    "locked": locked.name if locked else None,
                    "native": kernel.native_reason(target),
                    "agrees": (locked.name if locked else None) == choice,
                    "reasons": reasons,
                    # what covers it: the same command verify, run and lock name
                    "fix": None
                    if locked or kernel.native_reason(target)
                    else f"kernlock lock --target {target}",
                }
            )
        report.append(entry)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    for entry in report:
        click.echo(
            f"{entry['spec']} at {entry['commit'][:12]} ({len(entry['build_variants'])} build "
            "variants)"
        )
        covered = ", ".join(item["target"] for item in entry["targets"]) or "no target shown"
        click.echo(f"  commit for {covered}: {entry['resolution']}")
        if entry["override"] and not entry["target_pin"]:
            override = entry["override"]
            click.echo(
                f"  override for {override['when']} → {override['use']}: {override['reason']}"
            )
        for line in entry["used_by"]:
            click.echo(
                f"  used by {line} (what Transformers loads for the model; needed on "
                f"{', '.join(entry['devices'])})"
            )
        for item in entry["targets"]:
            has = item["locked"] or (
                f"native: {item['native']} (the layers keep Transformers' own code)"
                if item["native"]
                else "nothing (target not locked)"
            )
            click.echo(
                f"  target {item['target']}: kernels picks "
                f"{item['kernels_choice'] or 'no variant'}; the lock has {has}"
            )
            if item["locked"] and not item["agrees"]:
                click.echo(
                    "    warning: the lock disagrees with kernels' choice; re-run `kernlock lock`"
                )
            for reason in item["reasons"]:
                mark = "*" if item["locked"] and reason.startswith(item["locked"] + ":") else " "
                click.echo(f"   {mark} {reason}")
            if item["fix"]:
                click.echo(f"    fix: {item['fix']}")
