"""`kernlock export`: kernels.lock in kernels' own JSON lock format."""

from __future__ import annotations

import click

from kernlock.cli import handle_errors
from kernlock.lockfile import LockedKernel, Lockfile


def kernels_dependency(kernel: LockedKernel) -> tuple[str, int | str]:
    """The `(repo, version | revision)` under which kernels looks a locked entry up."""
    from kernlock.spec import parse_spec, version_of_branch

    spec = parse_spec(kernel.spec)
    if spec.revision is not None:
        number = version_of_branch(spec.revision)
        return (kernel.repo, number) if number is not None else (kernel.repo, spec.revision)
    if kernel.version is not None:
        return kernel.repo, kernel.version
    return kernel.repo, kernel.commit


def kernels_lock_json(lock: Lockfile) -> str:
    """kernels' `KernelLocks` JSON: one entry per dependency, requested kernels before dependencies.

    kernels looks a top-level kernel up by the first entry with its repo id, and a
    kernel's dependencies by (repo, version); two lock entries that map to the same
    kernels dependency keep the first.
    """
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    ordered = sorted(lock.kernels, key=lambda k: (bool(k.dependency_of) and not k.requested, k.spec))
    locks = {}
    for kernel in ordered:
        repo, pin = kernels_dependency(kernel)
        version = KernelVersion.Version(pin) if isinstance(pin, int) else KernelVersion.Revision(pin)
        locks.setdefault(KernelDependency(repo_id=repo, version=version), KernelLock(commit=kernel.commit))
    return KernelLocks(locks=locks).to_json()


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(["kernels"]), default="kernels", show_default=True,
              help="Output format: kernels' JSON lock (for get_locked_kernel / load_kernel).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of standard output.")
@click.option("--lockfile", type=click.Path(dir_okay=False), help="Lock file path (default: kernels.lock in the project).")
@click.option("--project", "project_dir", default=".", type=click.Path(file_okay=False), help="Project directory.")
@handle_errors
def export_command(fmt: str, output: str | None, lockfile: str | None, project_dir: str) -> None:
    """Export the lock for another tool.

    `--format kernels` writes the JSON that kernels.get_locked_kernel(repo, lockfile=...)
    and kernels.load_kernel(repo, lockfile=...) read: each locked kernel pinned to its commit.
    """
    from kernlock.atomic import atomic_write
    from kernlock.check import project_lock

    _, lock = project_lock(project_dir, lockfile)
    text = kernels_lock_json(lock) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    atomic_write(output, text)
    click.echo(f"wrote {output} ({len(lock.kernels)} kernels, kernels format)", err=True)
