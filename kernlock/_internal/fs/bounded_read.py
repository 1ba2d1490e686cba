"""Read a file a user or a project names, bounded: a regular file no larger than a cap, or an
error.

A config, a scanned source or a checkpoint record may be a link to `/dev/zero`, a FIFO or a
multi-gigabyte file; none of them is read whole. The file is opened without blocking (a FIFO with
no writer does not hang the open), checked to be regular on the open descriptor (no race with a
rename), and read to at most `limit` bytes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

CONFIG_LIMIT = 4 << 20  # a model's config.json: real ones are a few kB
SOURCE_LIMIT = 8 << 20  # one Python source file: Transformers' largest is under 1 MB


class UnreadableFile(OSError):
    """A file that is not read: not a regular file, larger than its cap, or unreadable."""


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of regular file `path`, or `UnreadableFile` naming why (never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise UnreadableFile(f"{path}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(f"{path} is not a regular file (a device, FIFO or socket)")
        if info.st_size > limit:
            raise UnreadableFile(f"{path} is {info.st_size} bytes, over the {limit}-byte cap")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > limit:
                raise UnreadableFile(f"{path} grew past the {limit}-byte cap while read")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
