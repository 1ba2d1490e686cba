"""`kernlock run -- COMMAND…`: run a program with the lock applied in every Python process."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from kernlock.cli import fail, handle_errors


def run_environment(lockfile: Path, strict: bool = True, verbose: bool = False) -> dict[str, str]:
    """Environment variables that make every Python process apply `lockfile`.

    The same variables work under cluster launchers: export them in the job script.
    """
    from kernlock.autoapply import APPLY_ENV
    from kernlock.patch import LOCKFILE_ENV, STRICT_ENV, VERBOSE_ENV

    startup = str(Path(__file__).resolve().parent.parent / "_startup")
    paths = [startup, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != startup]]
    return {
        APPLY_ENV: "1",
        LOCKFILE_ENV: str(lockfile),
        STRICT_ENV: "1" if strict else "0",
        "PYTHONPATH": os.pathsep.join(paths),
        **({VERBOSE_ENV: "1"} if verbose else {}),
    }


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--lockfile", type=click.Path(dir_okay=False), help="Lock file (default: found like kernlock.apply()).")
@click.option("--lenient", is_flag=True, help="Let kernels outside the lock load as usual (with a warning).")
@click.option("--vendor", "vendor", type=click.Path(file_okay=False, exists=True), help="Load the lock and kernels from this `kernlock vendor` directory.")
@click.option("-v", "--verbose", is_flag=True, help="Print the applied lock and every bound kernel load to stderr.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@handle_errors
def run_command(lockfile: str | None, lenient: bool, vendor: str | None, verbose: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with the lock applied in it and every Python process it starts.

    The lock is checked against this environment first; the command then
    replaces this process, so its exit code and signals are its own.
    """
    from kernlock.environment import current_target
    from kernlock.lockfile import load_lockfile
    from kernlock.patch import check_coverage, locate_lockfile

    from kernlock.cache import VENDOR_ENV

    if vendor:
        os.environ[VENDOR_ENV] = str(Path(vendor).resolve())
    path = locate_lockfile(lockfile)
    check_coverage(load_lockfile(path), current_target(), path)
    program = shutil.which(command[0])
    if program is None:
        fail(f"command not found: {command[0]}", 127)
    os.execve(program, list(command), {**os.environ, **run_environment(path, strict=not lenient, verbose=verbose)})
