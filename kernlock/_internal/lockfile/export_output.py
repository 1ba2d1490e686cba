"""Where `kernlock export -o FILE` writes: never over kernlock's lock or a file of another kind.

A regular file is replaced atomically; a pipe, FIFO or terminal (`-o /dev/stdout`) is written
into, and only once a reader is there (no reader: an error, never a hang).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernlock._internal.fs.atomic import atomic_write
from kernlock.errors import UsageError

_ELSEWHERE = "export elsewhere (-o another path), or omit -o to write to standard output"


def write_export(
    payload: bytes,
    lockfile: Path,
    output: Path,
    *,
    kind: str,
    is_kind: Callable[[bytes], bool],
    example: str,
) -> None:
    """Write `payload` to `output`; an existing file there must be `kind` (`is_kind` of its bytes),
    and the refusal suggests `-o example`."""
    import stat

    try:
        mode = output.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise UsageError(
            f"cannot write {output} ({error.strerror}); nothing was written", fix=_ELSEWHERE
        ) from None
    if mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        _write_stream(output, payload)
        return
    if not output.parent.is_dir():
        raise UsageError(
            f"{output.parent} is not a directory; nothing was written",
            fix=f"create it (mkdir -p {output.parent}) or export elsewhere",
        )
    if output.resolve() == lockfile.resolve():
        problem = f"{output} is kernlock's lock"
    elif mode is not None and (stat.S_ISDIR(mode) or not is_kind(output.read_bytes())):
        problem = f"{output} exists and is not {kind}"
    else:
        problem = None
    if problem:
        raise UsageError(
            f"{problem}; nothing was written", fix=f"export elsewhere, e.g. -o {example}"
        )
    atomic_write(output, payload)


def _write_stream(output: Path, payload: bytes) -> None:
    """Write into a pipe, FIFO or device that a reader holds open; refuse one nobody reads."""
    import errno
    import os

    try:
        # a FIFO with no reader: ENXIO at once, not a hang
        fd = os.open(output, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise UsageError(
                f"cannot write {output}: no process is reading it",
                fix="start the reader first, or omit -o to write to standard output",
            ) from None
        raise UsageError(f"cannot write {output} ({error.strerror})", fix=_ELSEWHERE) from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as stream:
            stream.write(payload)
    except OSError as error:
        raise UsageError(
            f"cannot write {output} ({error.strerror})",
            fix="check that the reader is still running, or omit -o to write to standard output",
        ) from None
