"""kernlock's private per-user directory: verified-file stamps and parsed locks live here.

Where: `$KERNLOCK_CACHE_DIR`, else `$XDG_CACHE_HOME/kernlock`, else `~/.cache/kernlock`;
`KERNLOCK_NO_CACHE=1` turns it off (every file is then re-hashed, every lock re-parsed).

Nobody else can make kernlock trust an entry:

* the directory is created 0700; every use opens it with `O_NOFOLLOW | O_DIRECTORY`
  and checks on the opened descriptor (`fstat`) that it is this user's and that
  no other user can write it (`open_private_dir`, which also guards the state
  directory of `kernlock._internal.fs.mutex`), then reads and writes entries relative
  to that descriptor, so swapping the path for a symlink or another user's
  directory after the check changes nothing (no check-then-use);
* each entry carries an HMAC-SHA256 under a random per-user key kept in the
  directory (0600, checked to be unreadable by others), so an entry copied from another user's
  cache, a backup or a shared image vouches for nothing, and a truncated or edited
  entry is a miss.

Every failure only costs speed: a missing, foreign or unreadable directory means
"no cache", silently. The key is written whole (a temporary linked into place),
and a key file left empty or short by a crash is replaced by a new one; a key file
that cannot be used (another user's, readable by others, not a file) turns the
cache off with one warning per process that names the file to remove. Windows
(no `O_NOFOLLOW`/`dir_fd`) has no cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
import sys
import threading
from pathlib import Path

from kernlock._internal import settings
from kernlock._internal.settings import CACHE_DIR_ENV, NO_CACHE_ENV

_KEY_NAME = "key"
_MAC_BYTES = 32
_lock = threading.Lock()
_opened: dict[str, tuple[int, bytes]] = {}  # root -> (directory descriptor, key), per process


def cache_root() -> Path | None:
    """The private directory's path, or None when caching is turned off."""
    if settings.flag(NO_CACHE_ENV, False):
        return None
    return (
        settings.path(CACHE_DIR_ENV)
        or (settings.path("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernlock"
    )


class NotPrivateError(PermissionError):
    """A per-user directory that belongs to another user or that other users can write."""


def _owned_and_private(info: os.stat_result) -> bool:
    """This user's, and nobody else may even read it (the key)."""
    return info.st_uid == os.geteuid() and not info.st_mode & 0o077


def _dir_problem(info: os.stat_result) -> str | None:
    """Why a directory is not this user's alone to change, or None."""
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by other users"
    return None


def open_private_dir(path: str | os.PathLike[str], parent_fd: int | None = None) -> int:
    """Open the per-user directory `path`, creating it (0700) if missing; with `parent_fd`, a name
    inside that one.

    Owner and mode are checked on the opened descriptor (`O_NOFOLLOW`, `fstat`): no check-then-use.
    Raises `NotPrivateError` when another user owns it or other users can write it, and
    `OSError` when it cannot be created or opened (a symlink is ELOOP).
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        if parent_fd is None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another process created it first
            os.mkdir(path, 0o700, dir_fd=parent_fd)
        fd = os.open(path, flags, dir_fd=parent_fd)
    problem = _dir_problem(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise NotPrivateError(problem)
    return fd


def _read_key(fd: int, root: str = "") -> bytes | None:
    """The directory's key: created when missing, repaired when empty or short; None (said once)
    when not usable."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(_KEY_NAME, flags, dir_fd=fd)
    except FileNotFoundError:
        return _new_key(fd, replace=False, root=root)
    except OSError as error:
        return _cache_off(root, f"its key file cannot be opened ({error.strerror})")
    with os.fdopen(handle, "rb") as source:
        info = os.fstat(source.fileno())
        key = source.read(64)
    if not stat.S_ISREG(info.st_mode):
        return _cache_off(root, "its key file is not a regular file")
    if not _owned_and_private(info):
        owner = (
            f"owned by uid {info.st_uid}"
            if info.st_uid != os.geteuid()
            else "readable by other users"
        )
        return _cache_off(root, f"its key file is {owner}")
    # left empty or short by a crash while it was written: nothing was ever signed with it
    if len(key) != 32:
        return _new_key(fd, replace=True, root=root)
    return key


def _new_key(fd: int, *, replace: bool, root: str) -> bytes | None:
    """Write a new random key into place whole (a temporary linked or renamed over the name): a
    crash leaves no empty key.

    Without `replace` another process's key that got there first wins (it is read instead).
    """
    # what secrets.token_bytes() returns, without importing secrets on apply()'s path
    key = os.urandom(32)
    temp = f".{_KEY_NAME}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(key)
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(temp, _KEY_NAME, src_dir_fd=fd, dst_dir_fd=fd)
            return key
        try:
            os.link(temp, _KEY_NAME, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:  # another process created it first: use theirs
            return _read_key(fd, root)
        return key
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=fd)


_said: set[str] = set()


def _cache_off(root: str, why: str) -> bytes | None:
    """Say once per process and directory why the private cache is off (it only costs speed), then
    None."""
    if root not in _said:
        _said.add(root)
        sys.stderr.write(
            f"kernlock: warning: the private cache {root} is off: {why}; remove "
            f"{os.path.join(root, _KEY_NAME)} and kernlock makes a new one (or set "
            f"{NO_CACHE_ENV}=1)\n"
        )
    return None


def _directory() -> tuple[int, bytes] | None:
    """The opened private directory and its key, or None (cache off or not private)."""
    if not hasattr(os, "O_NOFOLLOW") or os.open not in os.supports_dir_fd:
        return None
    root = cache_root()
    if root is None:
        return None
    name = os.path.abspath(root)
    with _lock:
        opened = _opened.get(name)
        if opened is not None:
            if _same_directory(name, opened[0]):
                return opened
            os.close(opened[0])
            del _opened[name]
        try:
            fd = open_private_dir(name)
        except OSError:  # not private, a symlink, a file, no permission: no cache
            return None
        try:
            key = _read_key(fd, name)
        except OSError as error:
            key = _cache_off(name, f"its key cannot be written ({error.strerror})")
        if key is None:
            os.close(fd)
            return None
        _opened[name] = (fd, key)
        return fd, key


def _same_directory(name: str, fd: int) -> bool:
    """Whether the path still names the directory opened earlier (not replaced) and it is still
    private."""
    try:
        now, then = os.stat(name, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino) and _dir_problem(then) is None


def _mac(key: bytes, name: str, payload: bytes) -> bytes:
    return hmac.new(key, name.encode() + b"\0" + payload, hashlib.sha256).digest()


def read_entry(name: str) -> bytes | None:
    """The payload stored under `name` by this user's kernlock, or None."""
    opened = _directory()
    if opened is None:
        return None
    fd, key = opened
    try:
        handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), dir_fd=fd)
        with os.fdopen(handle, "rb") as source:
            data = source.read()
    except OSError:
        return None
    mac, payload = data[:_MAC_BYTES], data[_MAC_BYTES:]
    return payload if hmac.compare_digest(mac, _mac(key, name, payload)) else None


def write_entry(name: str, payload: bytes) -> bool:
    """Store `payload` under `name` (atomically); False when there is no private directory."""
    opened = _directory()
    if opened is None:
        return False
    fd, key = opened
    temp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        handle = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd
        )
        with os.fdopen(handle, "wb") as out:
            out.write(_mac(key, name, payload) + payload)
        os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)
        return False
    return True


def prune(prefix: str, keep: int) -> None:
    """Remove all but the `keep` newest entries whose names start with `prefix`."""
    opened = _directory()
    if opened is None:
        return
    fd = opened[0]
    try:
        with os.scandir(fd) as entries:
            found = [
                (e.stat(follow_symlinks=False).st_mtime_ns, e.name)
                for e in entries
                if e.name.startswith(prefix)
            ]
        for _, name in sorted(found)[:-keep] if keep else sorted(found):
            os.unlink(name, dir_fd=fd)
    except OSError:
        return


def entry_names(prefix: str) -> list[str] | None:
    """The names of the entries that start with `prefix`, sorted; None when there is no private
    directory."""
    opened = _directory()
    if opened is None:
        return None
    try:
        with os.scandir(opened[0]) as entries:
            return sorted(e.name for e in entries if e.name.startswith(prefix))
    except OSError:
        return None


def remove_entry(name: str) -> None:
    """Remove the entry `name`, if it is there."""
    opened = _directory()
    if opened is not None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=opened[0])


def entry_name(kind: str, *parts: str | bytes) -> str:
    """A file name for an entry of `kind` keyed by `parts`."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return f"{kind}-{digest.hexdigest()}"
