"""What the commands share: options spelled once, and one way to turn errors into an exit.

Errors print as one line (`kernlock: error: …`): exit 2 for bad usage or
unreadable input, 1 for failed checks or resolution, 130 when interrupted. Under
`--json` the error is a JSON object on stdout instead (see `error_json`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from kernlock.errors import KernlockError, UsageError

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

project_option = click.option(
    "--project",
    "project_dir",
    default=".",
    type=click.Path(file_okay=False),
    help="Project directory.",
)
lockfile_option = click.option(
    "--lockfile",
    type=click.Path(dir_okay=False),
    help="Lock file path (default: the project's, [tool.kernlock] lockfile or kernels.lock).",
)
locked_option = click.option(
    "--locked",
    is_flag=True,
    help="Fail unless the lock is fresh against the project's sources (like cargo --locked).",
)
quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="Print nothing but warnings and errors."
)
all_targets_option = click.option(
    "--all-targets",
    is_flag=True,
    help="Every target declared in [tool.kernlock] targets, else every locked target.",
)


def json_option(help: str = "Print machine-readable JSON.") -> Decorator:
    """`--json`, with the command's own description of what it prints."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def targets_option(help: str) -> Decorator:
    """`--target TARGET` (repeatable), passed as `targets`."""
    return click.option("--target", "targets", multiple=True, metavar="TARGET", help=help)


def group_option(help: str) -> Decorator:
    """`--group GROUP` (repeatable), passed as `groups`."""
    return click.option("--group", "groups", multiple=True, metavar="GROUP", help=help)


def lock_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--lockfile` and `--project`: which project and lock a command works on."""
    return lockfile_option(project_option(fn))


def fail(message: str, code: int) -> None:
    """Print one error line and exit."""
    click.echo(f"kernlock: error: {message}", err=True)
    sys.exit(code)


def error_json(error: KernlockError) -> str:
    """A command's error as `--json` prints it: ``{"ok": false, "error": {...}}``.

    ``error`` holds ``type`` (the exception class, e.g. ``LockfileNotFoundError``), ``problem``
    (what is wrong), ``fix`` (what to do about it, or null where nothing can be done), ``message``
    (the one line the text form prints after ``kernlock: error:``, problem and fix together) and
    ``exit_code``, as pip's `DiagnosticPipError` keeps its context and hint apart. A lock error's
    ``problem`` is without its location, which it adds as ``source`` and ``key_path`` where it has
    them.
    """
    import json

    from kernlock.errors import LockfileError, redact

    body: dict[str, Any] = {
        "type": type(error).__name__,
        "problem": error.message,
        "fix": error.fix_text,
        "message": str(error),
        "exit_code": error.exit_code,
    }
    if missing := getattr(error, "missing", ()):  # every kernel × target without a build
        body["problems"] = [item.to_dict() for item in missing]
    if isinstance(error, LockfileError):
        body["problem"] = redact(error.problem)
        body.update(
            {
                key: value
                for key, value in (("source", error.source), ("key_path", list(error.key_path)))
                if value
            }
        )
    return json.dumps({"ok": False, "error": body}, indent=2, ensure_ascii=False)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn kernlock's errors into one line (a JSON object under `--json`) and an exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from kernlock._internal.settings import check_hub_environment

        try:
            check_hub_environment()
            return fn(*args, **kwargs)
        except KernlockError as error:
            if kwargs.get("as_json"):
                click.echo(error_json(error))
                sys.exit(error.exit_code)
            fail(str(error), error.exit_code)
        except KeyboardInterrupt:
            fail("interrupted", 130)

    return wrapper


def not_in_lock(
    repo: str, command: str, match: str | None, locked: list[str], otherwise: str
) -> Any:
    """The `UsageError` for a REPO argument the lock does not hold: its did-you-mean `match` and
    the command to run with it, else `otherwise`."""
    import shlex

    return UsageError(
        f"{repo} is not in the lock"
        + (f" (did you mean {match}?)" if match else "")
        + f"; locked: {', '.join(locked) or 'nothing'}",
        fix=f"`kernlock {command} {shlex.quote(match)}`" if match else otherwise,
    )
