"""The smoke run of `kernlock lock --record -- CMD`: run CMD once under the recording loader and
return the specs of the kernels it requested.

CMD runs in the current directory with this environment plus kernlock's start-up directory on
`PYTHONPATH` and `KERNLOCK_RECORD` naming a private file (`recorder`);
no lock is applied (`KERNLOCK_APPLY=0`), so it loads kernels from the Hub exactly as it would
without kernlock. It writes whatever CMD writes (checkpoints, logs); kernlock keeps nothing of
the run but the requests. CMD's standard output goes to kernlock's standard error, so that
`kernlock lock --json` prints only the JSON. The specs are then locked by `kernlock lock`'s
`lock_request` (`kernlock._internal.resolve.relock`), before whose project mutex the command runs:
it may run kernlock itself.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import IO, Any

from kernlock.errors import KernlockError, UsageError


def record_command(command: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Run `command` once, recording every kernel request; its specs (first request first, each
    once) and warnings.

    Raises `KernlockError` when the command does not exit with status 0 (nothing is to be
    written then), `UsageError` when it cannot be run or would skip the start-up hook.
    """
    from kernlock._internal.runtime.autoapply import STARTUP_DIR, hook_skipping_option
    from kernlock._internal.runtime.recorder import read_requests
    from kernlock._internal.settings import APPLY_ENV, RECORD_ENV

    shown = shlex.join(command)
    if not command:
        raise UsageError(
            "--record needs the command to record", fix="write `kernlock lock --record -- CMD…`"
        )
    program = shutil.which(command[0])
    if program is None:
        raise UsageError(f"--record: command not found: {command[0]}", fix="name a program on PATH")
    option = hook_skipping_option(command, program)
    if option is not None:
        raise UsageError(
            f"--record: `{shown}` runs Python with {option}, which skips the start-up hook that "
            "records kernel loads",
            fix="drop the option",
        )
    directory = tempfile.mkdtemp(prefix="kernlock-record-")
    path = os.path.join(directory, "requests.jsonl")
    paths = [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR
    ]
    environment = {
        **os.environ,
        RECORD_ENV: path,
        APPLY_ENV: "0",
        "PYTHONPATH": os.pathsep.join([STARTUP_DIR, *paths]),
    }
    try:
        status = subprocess.call(
            list(command), executable=program, env=environment, stdout=_stderr()
        )
        if status != 0:
            raise KernlockError(
                f"the recorded command `{shown}` {_exited(status)}; nothing was written",
                fix="make the command succeed on its own, then run `kernlock lock --record` again",
            )
        requests, warnings = read_requests(path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    specs = tuple(dict.fromkeys(request.spec for request in requests))
    return specs, tuple(warnings)


def _exited(status: int) -> str:
    """`exited with status 3`, or `was killed by SIGTERM`."""
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-status).name}"
        return f"was killed by signal {-status}"
    return f"exited with status {status}"


def _stderr() -> IO[Any] | int | None:
    """Where the command's standard output goes: kernlock's standard error (inherited when it has
    no file descriptor)."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return sys.stderr
