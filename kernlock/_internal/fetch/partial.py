"""Writing into a Hub cache that other users can write (a group-shared cache: setgid 2775, umask
002).

Nothing written here follows a link or lands outside the cache, and a partial download is resumed
only when nobody else could have written it:

* the directories below the cache root (`kernels--org--repo/blobs`,
  `snapshots/<commit>/build/<variant>`) are opened one component at a time with `O_NOFOLLOW |
  O_DIRECTORY` (`open_below`), and every name in them is created, opened, renamed and removed
  relative to that descriptor;
* a download streams into `<etag>.<random>.incomplete`, created with `O_CREAT | O_EXCL | O_NOFOLLOW`
  and mode 0600: nobody else can open it for writing, so the sha256 taken of the bytes as they are
  written is the sha256 of the file;
* its server validator (the CDN's ETag) sits beside it in `…-validator`, created the same way; one
  of this user's is removed first, another user's (a planted symlink included) is left alone and
  makes the partial not resumable;
* a partial a killed run left is resumed only when the opened descriptor (`fstat`, not the path)
  shows a regular file of this user with no group or other write bit and one link (`open_partial`),
  and so is its validator; anything else is never resumed, and removed only when it is this user's.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from kernlock.errors import IntegrityError

VALIDATOR_SUFFIX = "-validator"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def validator_name(partial: str) -> str:
    """The name of the file that keeps the server's validator (ETag) of a partial download, next to
    it."""
    return partial + VALIDATOR_SUFFIX


def open_below(root: Path, *parts: str, create: bool = True) -> int:
    """A descriptor of `root/parts…`, each part opened without following a link (created when
    missing and `create`).

    `root` (the cache directory) may itself be a link, as a cache moved to a bigger disk often is;
    nothing below it may. A link or a non-directory there is an `IntegrityError`: kernlock writes
    nothing outside the cache.
    """
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for index, part in enumerate(parts):
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                where = root.joinpath(*parts[: index + 1])
                raise IntegrityError(
                    f"{where} in the Hub cache is a link or not a directory (another user of a "
                    "shared cache may have planted it); kernlock writes nothing through it",
                    fix=f"remove it (`rm -- {where}`) and run the command again",
                ) from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def opened_below(root: Path, *parts: str) -> Iterator[int]:
    """`open_below` as a context: the descriptor is closed on leaving."""
    fd = open_below(root, *parts)
    try:
        yield fd
    finally:
        os.close(fd)


def _private(info: os.stat_result) -> bool:
    """A regular file of this user that nobody else can write, nor reach under another name."""
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid == os.geteuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        and info.st_nlink == 1
    )


def is_mine(dir_fd: int, name: str) -> bool:
    """Whether `name` (not followed if a link) belongs to this user."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid == os.geteuid()
    except OSError:
        return False


def remove_mine(dir_fd: int, name: str) -> None:
    """Remove `name` (a link itself, never its target) when it is this user's; another user's is
    left alone."""
    if is_mine(dir_fd, name):
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)


def create_private(dir_fd: int, name: str) -> int:
    """A new file `name`, mode 0600, opened for reading and writing; never an existing file nor a
    link's target."""
    return os.open(
        name,
        os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC,
        0o600,
        dir_fd=dir_fd,
    )


def open_partial(dir_fd: int, name: str) -> int | None:
    """`name` opened for reading and writing when it is a partial download this user may resume,
    else None.

    Checked on the descriptor: a regular file of this user, no group or other write bit, one link.
    Never a link (`O_NOFOLLOW`) and never blocking on a FIFO (`O_NONBLOCK`).
    """
    try:
        # another user's is never opened
        if not _private(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)):
            return None
        fd = os.open(
            name, os.O_RDWR | os.O_APPEND | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return None
    if _private(os.fstat(fd)):
        os.set_blocking(fd, True)
        return fd
    os.close(fd)
    return None


def read_validator(dir_fd: int, partial: str) -> str | None:
    """The validator recorded for `partial`, when its file is one this user wrote and nobody else
    can write."""
    try:
        fd = os.open(
            validator_name(partial),
            os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC,
            dir_fd=dir_fd,
        )
    except OSError:
        return None
    try:
        if not _private(os.fstat(fd)):
            return None
        value = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return value if value.startswith('"') and len(value) < 256 else None


def write_validator(dir_fd: int, partial: str, etag: str | None) -> None:
    """Record `etag` for `partial` (None: forget it), in a new 0600 file; another user's file there
    is left alone (then nothing is recorded and the partial is not resumable)."""
    name = validator_name(partial)
    remove_mine(dir_fd, name)
    if not etag:
        return
    try:
        fd = create_private(dir_fd, name)
    except FileExistsError:
        return
    try:
        os.write(fd, etag.encode("ascii", "replace"))
    finally:
        os.close(fd)


@dataclass
class Partial:
    """A download in progress: `name` in the directory `dir_fd` (`path` names it in messages), open
    as `fd`, a private file of this user (`create_private`, or a kept one `open_partial`
    accepted)."""

    dir_fd: int
    name: str
    fd: int
    path: Path

    def validator(self) -> str | None:
        """The server validator recorded when the bytes in the file were received."""
        return read_validator(self.dir_fd, self.name)

    def record(self, etag: str | None) -> None:
        """Record the validator of the bytes now being received (None: there is none; not
        resumable)."""
        write_validator(self.dir_fd, self.name, etag)

    def restart(self) -> None:
        """Drop the bytes kept (the same private file, emptied) and their validator."""
        os.ftruncate(self.fd, 0)
        self.record(None)

    def resumable(self) -> bool:
        """Worth keeping for the next run: some bytes, and the server's validator."""
        return os.fstat(self.fd).st_size > 0 and self.validator() is not None


def drop(dir_fd: int, partial: str) -> None:
    """Remove a partial download and its validator, those of them that are this user's."""
    remove_mine(dir_fd, partial)
    remove_mine(dir_fd, validator_name(partial))


def validator_path(partial: Path) -> Path:
    """Where the server's validator (ETag) of the partial download `partial` is kept, next to it."""
    return partial.with_name(validator_name(partial.name))
