"""Write inside a directory without following a link in it.

A shared directory (a vendor directory on a cluster filesystem, a Trainer's `output_dir`) may
hold links another user planted: `DIR/kernels.lock -> ~victim/.bashrc`, `DIR/kernels--org--repo
-> /elsewhere`. kernlock names the directory itself (it may be a link the user made); below it,
every step is opened relative to its parent's descriptor with `O_NOFOLLOW`, files are written to
a fresh temporary name and renamed into place with directory descriptors, and a link where
kernlock would write is refused with one line. `atomic_write` (which follows a link on purpose,
for a user's own linked `pyproject.toml`) is for files the user names; this is for the entries
kernlock creates.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePath

from kernlock._internal.fs.atomic import current_umask
from kernlock.errors import WriteError

_HERE = PurePath()
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


def _link_refused(root: Path, entry: PurePath) -> WriteError:
    where = root / entry
    try:
        target = f" (to {os.readlink(where)})"
    except OSError:
        target = ""
    return WriteError(
        f"refusing to write through {where}: it is a symbolic link{target}, which kernlock never "
        "follows inside a directory it writes; nothing was written there",
        fix=f"check who made that link; then write into a directory only you can change, or have "
        f"{where} replaced by a real directory or file",
    )


@contextmanager
def directory(root: Path, relative: PurePath = _HERE, create: bool = False) -> Iterator[int]:
    """A descriptor of `root/relative`, each step below `root` opened without following a link
    (made, with the umask's mode, when `create`); a link on the way is a `WriteError`."""
    fd = os.open(root, _DIRECTORY_FLAGS)
    try:
        walked = PurePath()
        for part in relative.parts:
            walked /= part
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                child = os.open(part, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(fd, part):
                    raise _link_refused(root, walked) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _is_link(directory_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def refuse_link(directory_fd: int, root: Path, name: str) -> None:
    """A `WriteError` when entry `name` of the directory is a symbolic link."""
    if _is_link(directory_fd, name):
        raise _link_refused(root, PurePath(name))


def write_inside(
    root: Path,
    name: str,
    data: bytes | str,
    below: PurePath = _HERE,
    staging: PurePath | None = None,
) -> None:
    """Replace file `root/below/name` with `data` atomically, refusing a link at `name` or on the
    way from `root` (the directories of `below` are made as needed; an existing file keeps its
    mode). The temporary file is written in `root/staging` when given (the same filesystem), so
    that nothing reading `below` ever sees it, even one a killed writer left behind."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with (
        directory(root, below, create=bool(below.parts)) as fd,
        directory(root, below if staging is None else staging) as staged,
    ):
        refuse_link(fd, root / below, name)
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~current_umask()
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        out = os.open(temp, flags, 0o600, dir_fd=staged)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fchmod(handle.fileno(), mode)
                os.fsync(handle.fileno())
            os.replace(temp, name, src_dir_fd=staged, dst_dir_fd=fd)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temp, dir_fd=staged)
            raise
        os.fsync(fd)
