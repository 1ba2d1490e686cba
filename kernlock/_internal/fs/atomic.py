"""One way to replace a file: write a sibling temporary file, fsync, rename.

A reader sees the old bytes or the new bytes, never a mix; on any error the
old file is untouched. A symlink is followed (its target is replaced, the link
kept) and an existing file's permission bits are kept. Every file kernlock
writes from memory into a file the user names (locks, `pyproject.toml`, kernels' JSON lock) goes
through `atomic_write`; entries kernlock creates inside a shared directory (the vendor
directory's, a checkpoint's `kernlock.json`) go through `inside.write_inside`, which never follows
a link. Two writers rename on their own, by
design: downloads (`hub_cache.py`, `partial.py`) stream into a private temporary blob
that must match its hash before the rename, and the private store (`private.py`) writes relative to
a directory descriptor and never follows a link.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernlock.errors import WriteError


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Replace `path` with `data` atomically (text is written as UTF-8).

    An existing file keeps its mode; a new one gets what the umask allows. A
    failure to write (a full disk, a read-only directory) is a `WriteError`
    naming the file, which is then unchanged.
    """
    try:
        _replace(
            Path(os.path.realpath(path)), data.encode("utf-8") if isinstance(data, str) else data
        )
    except OSError as error:
        import errno

        fix = (
            "free space on its disk and run the command again"
            if error.errno in (errno.ENOSPC, errno.EDQUOT)
            else "make its directory writable, or write it elsewhere"
        )
        state = "it is unchanged" if os.path.lexists(path) else "nothing was written"
        raise WriteError(
            f"cannot write {path} ({error.strerror or error}); {state}", fix=fix
        ) from None


def _replace(target: Path, payload: bytes) -> None:
    """Write `payload` to a sibling temporary file, fsync it and rename it over `target`."""
    # here, not at the top: readers (`verify`, `apply()`) import this module and never write
    import tempfile

    mode = file_mode_for(target)
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def file_mode_for(path: Path) -> int:
    """The mode a rewrite of `path` gets: its own when it exists, else what the umask allows."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """This process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
