"""`kernlock run -- COMMAND…`: run a program with the lock applied in every Python process."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import click

from kernlock._internal.cli.options import fail, group_option, handle_errors, locked_option


def run_environment(
    lockfile: Path, strict: bool = True, verbose: bool = False, groups: tuple[str, ...] = ()
) -> dict[str, str]:
    """Environment variables that make every Python process apply `lockfile` (only `groups`, if
    any).

    The same variables work under cluster launchers: `kernlock run --export` prints them for a job
    script.
    """
    from kernlock._internal.runtime.autoapply import STARTUP_DIR as startup
    from kernlock._internal.settings import (
        APPLY_ENV,
        GROUPS_ENV,
        LOCKFILE_ENV,
        STRICT_ENV,
        VERBOSE_ENV,
    )

    paths = [
        startup,
        *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != startup],
    ]
    return {
        APPLY_ENV: "1",
        LOCKFILE_ENV: str(lockfile),
        STRICT_ENV: "1" if strict else "0",
        "PYTHONPATH": os.pathsep.join(paths),
        **({VERBOSE_ENV: "1"} if verbose else {}),
        **({GROUPS_ENV: ",".join(groups)} if groups else {}),
    }


def command_scripts(command: tuple[str, ...]) -> list[str]:
    """The script a command runs, if one can be told (`python train.py`, `torchrun … train.py`,
    `./train.py`)."""
    return [arg for arg in command if arg.endswith(".py") and os.path.isfile(arg)][:1]


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--lockfile",
    type=click.Path(dir_okay=False),
    help="Lock file (default: found like kernlock.apply()).",
)
@locked_option
@click.option(
    "--lenient", is_flag=True, help="Let kernels outside the lock load as usual (with a warning)."
)
@click.option(
    "--vendor",
    "vendor",
    type=click.Path(file_okay=False, exists=True),
    help="Load the lock and kernels from this `kernlock vendor` directory.",
)
@group_option(
    "Bind only the ungrouped entries and those of this [tool.kernlock.groups] group "
    "(repeatable): the command's processes refuse the other groups' kernels."
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Print the applied lock and every bound kernel load to stderr.",
)
@click.option(
    "--export",
    "export",
    is_flag=True,
    help='Print the environment as `export` lines for a job script (`eval "$(kernlock run '
    '--export)"`) instead of running a command.',
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def run_command(
    lockfile: str | None,
    locked: bool,
    lenient: bool,
    vendor: str | None,
    groups: tuple[str, ...],
    verbose: bool,
    export: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND with the lock applied in it and every Python process it starts.

    The lock is checked against this environment first; the command then
    replaces this process, so its exit code and signals are its own.
    """
    if not command and not export:
        fail(
            "missing COMMAND; use `kernlock run -- COMMAND…`, or `kernlock run --export` for a "
            "job script",
            2,
        )
    from kernlock._internal.host import machine_target
    from kernlock._internal.project.workspace import VENDOR_ENV, applied_workspace
    from kernlock._internal.rules.coverage import require_coverage
    from kernlock.errors import LockfileError, LockfileNotFoundError

    if vendor:
        os.environ[VENDOR_ENV] = str(Path(vendor).resolve())
    try:
        workspace = applied_workspace(
            lockfile, scripts=command_scripts(command), naming="name one with --lockfile"
        )
        lock = workspace.read_lock()
    except LockfileNotFoundError as error:
        fail(str(error), 1)  # no lock: exit 1, as the start-up hook does in the command's processes
    except LockfileError as error:
        fail(str(error), error.exit_code)  # a lock that cannot be read: exit 2, as every command
    path = workspace.lock_path.resolve()
    # as apply(): a named lock is trusted by naming it
    if workspace.discovered and workspace.has_sources:
        from kernlock._internal.rules.freshness import require_trusted

        # the command's processes get a named lock and never read the project
        require_trusted(workspace, lock)
    if locked:
        from kernlock._internal.rules.freshness import require_fresh

        require_fresh(workspace, lock)
    from kernlock._internal.project.groups import group_options, select_groups

    after = f"-- {shlex.join(command)}" if command else "--export"
    lock = select_groups(lock, groups, lambda names: f"kernlock run {group_options(names)} {after}")
    # the command's processes apply the lock for $KERNLOCK_TARGET when it is set
    require_coverage(lock, machine_target(), path)
    environment = run_environment(path, strict=not lenient, verbose=verbose, groups=groups)
    if export:
        if vendor:
            environment[VENDOR_ENV] = os.environ[VENDOR_ENV]
        click.echo(
            "\n".join(f"export {name}={shlex.quote(value)}" for name, value in environment.items())
        )
        return
    program = shutil.which(command[0])
    if program is None:
        return fail(f"command not found: {command[0]}", 127)
    from kernlock._internal.runtime.autoapply import hook_skipping_option, runs_python

    # a Python (by its name or the file it resolves to), or a console script whose #! gives one
    option = hook_skipping_option(command, program)
    if option is not None:
        shown = (
            f"`{command[0]} {option}`"
            if runs_python(command[0], program)
            else f"`{command[0]}` (its #! line runs Python with {option})"
        )
        fail(
            f"{shown} skips Python's start-up hook (sitecustomize on PYTHONPATH), so kernlock run "
            "cannot apply the lock in it; drop the option, or call kernlock.apply() at the top of "
            "its script",
            2,
        )
        return
    from kernlock._internal.settings import RUN_PYTHON_ENV

    # named by the start-up hook where kernlock cannot be imported
    environment[RUN_PYTHON_ENV] = sys.executable
    os.execve(program, list(command), {**os.environ, **environment})
