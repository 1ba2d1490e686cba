"""A lock file's bytes, read safely: never a device, a FIFO or a file larger than any lock.

Its own module so that `lockfile_io` (kernlock's lock) and `kernels_lock` (kernels' JSON lock),
which each import the other's helpers where they are needed, read a lock path the same way without
an import cycle.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernlock.errors import LockfileError, LockfileNotFoundError

# no lock is this large: a bigger file (or a device: /dev/zero) is never read whole
LOCK_SIZE_LIMIT = 64 << 20


def _not_a_lock_fix(path: Path) -> str:
    """The fix for a lock path that names no lock file kernlock can read (a device, a FIFO, an
    oversized file)."""
    import shlex

    from kernlock._internal.settings import LOCKFILE_ENV
    from kernlock._internal.settings import path as env_path

    named = env_path(LOCKFILE_ENV)
    if named is not None and os.path.abspath(named) == os.path.abspath(path):
        return f"unset {LOCKFILE_ENV}, or point it at kernlock's lock (kernels.lock by default)"
    return (
        f"point the lock path at a regular lock file, or move {shlex.quote(str(path))} away (a "
        f"symlink: `rm {shlex.quote(str(path))}`) and run `kernlock lock`"
    )


def not_regular_error(path: Path) -> LockfileError:
    """The refusal of a lock path that is a device, a FIFO or a socket (also through a symlink)."""
    return LockfileError(
        f"{path} is not a regular file (a device, FIFO or socket), so it is not read as a lock",
        fix=_not_a_lock_fix(path),
    )


_READABLE = "make the lock file readable (check its permissions and its directory's)"


def directory_error(path: Path) -> LockfileError:
    """The refusal of a lock path that is a directory."""
    return LockfileError(
        f"{path} is a directory, not a lock file",
        fix=f"move it away (mv {path} {path}.bak) and run `kernlock lock`",
    )


def read_lock_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the lock at `path`, refused with one line when it is not a regular file (a
    device such as /dev/zero, a FIFO, a socket, also through a symlink) or is larger than
    `LOCK_SIZE_LIMIT`: never read until memory runs out, never a hang on a FIFO."""
    import stat

    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise LockfileNotFoundError(
            "no such lock file", source=str(path), fix="create it with `kernlock lock`"
        ) from None
    except OSError as error:
        raise LockfileError(
            f"{path}: cannot read the lock file ({error.strerror})", fix=_READABLE
        ) from None
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise directory_error(path)
        if not stat.S_ISREG(status.st_mode):
            raise not_regular_error(path)
        if status.st_size > LOCK_SIZE_LIMIT:
            raise _too_large(path)
        with os.fdopen(os.dup(fd), "rb") as stream:
            data = stream.read(LOCK_SIZE_LIMIT + 1)
    except OSError as error:
        raise LockfileError(
            f"{path}: cannot read the lock file ({error.strerror})", fix=_READABLE
        ) from None
    finally:
        os.close(fd)
    if len(data) > LOCK_SIZE_LIMIT:  # grew while read
        raise _too_large(path)
    return data


def _too_large(path: Path) -> LockfileError:
    return LockfileError(
        f"{path} is larger than {LOCK_SIZE_LIMIT >> 20} MiB, which no lock is, so it is not read",
        fix=_not_a_lock_fix(path),
    )
