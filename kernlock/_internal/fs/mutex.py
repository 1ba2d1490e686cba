"""The per-project cross-process mutex that serialises `kernlock lock`/`remove` (and `kernlock
vendor`).

It lives with the project (where uv keeps its mutex under its cache or `.venv`, and
pip-tools has none): a mutex file `.kernlock.mutex` in the project root, beside
`kernels.lock`, so two writers of one checkout wait for each other whatever their
per-user settings (two CI jobs with different
`$KERNLOCK_STATE_DIR`s). It is readable by exactly those who can write the project
directory (0600; 0640, given to the directory's group, in a group-writable one, as a
team's setgid 2775 checkout is), since they are the writers it must serialise and
`flock` needs only a read-only descriptor; it is opened without following a symlink,
and removed on release (the holder unlinks it before unlocking; a waiter that wins
the lock of an unlinked file tries again), so nothing is left in the checkout. A lock
file this user cannot open in a directory this user can write (another user's 0600
one) is waited on as held, never skipped. A project directory this user cannot write
(a read-only checkout) gets none: readers never take the lock, and a writer of a lock
elsewhere (`--lockfile`) or `lock --check` there still works.

A second mutex file in a private per-user state directory (`$KERNLOCK_STATE_DIR`,
else `$XDG_STATE_HOME/kernlock`, else `~/.local/state/kernlock`), created 0700 and
checked on the opened descriptor, is always taken after it, so one user's writers
also wait for each other when the project directory is read-only. The holder
writes its pid into each mutex file; a waiter gives up after a timeout
(`$KERNLOCK_MUTEX_TIMEOUT` seconds, default 300) with a message naming that pid.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import time
from pathlib import Path
from types import TracebackType

from kernlock._internal.fs.private import NotPrivateError, open_private_dir
from kernlock._internal.settings import MUTEX_TIMEOUT_ENV, STATE_DIR_ENV, path, seconds
from kernlock.errors import ProjectBusyError, UsageError

DEFAULT_TIMEOUT = 300.0
# in the project root, beside kernels.lock; removed on release
PROJECT_MUTEX_NAME = ".kernlock.mutex"
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def state_dir() -> Path:
    """The private per-user directory for kernlock's state (not created here)."""
    return (
        path(STATE_DIR_ENV)
        or (path("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "kernlock"
    )


def _open_state_dir(directory: Path, parent_fd: int | None = None) -> int:
    """`open_private_dir`, with the fix when the state directory is not private."""
    try:
        return open_private_dir(directory, parent_fd)
    except NotPrivateError as error:
        raise UsageError(
            f"kernlock's state directory {state_dir()} is {error}",
            fix=f"set ${STATE_DIR_ENV} to a directory only you can write",
        ) from None
    # not a directory (/dev/null), no access to it or its parent, a read-only disk
    except OSError as error:
        raise _unusable_state_dir(error) from None


def _unusable_state_dir(error: OSError) -> UsageError:
    where = (
        f": {error.filename}" if error.filename and str(error.filename) != str(state_dir()) else ""
    )
    return UsageError(
        f"kernlock's state directory {state_dir()} cannot be used ({error.strerror}{where})",
        fix=f"set ${STATE_DIR_ENV} to a directory of your own that you can create and write, "
        "or unset it (the default is ~/.local/state/kernlock)",
    )


def _wait(fd: int, deadline: float, timed_out: str, timeout: float) -> None:
    """Take the exclusive lock on `fd`, or raise `ProjectBusyError` naming the holder's pid at
    `deadline`.

    The pid is what the mutex file's owner wrote: `kill` is offered only when that owner is this
    user, never for a pid another user wrote (it could name any process, one of this user's own
    included).
    """
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                owner = os.fstat(fd).st_uid
                os.close(fd)
                if owner != os.geteuid():
                    said = f", which says it is pid {holder}" if holder.isdigit() else ""
                    raise ProjectBusyError(
                        f"another user's kernlock ({_user(owner)}{said}) has been {timed_out} for "
                        f"over {timeout:g} s",
                        fix=f"wait for it, ask {_user(owner)} to stop it, or raise "
                        f"${MUTEX_TIMEOUT_ENV}",
                    ) from None
                who = f"pid {holder}" if holder.isdigit() else "an unknown process"
                stop = f", or stop it (kill {holder})" if holder.isdigit() else ""
                raise ProjectBusyError(
                    f"another kernlock ({who}) has been {timed_out} for over {timeout:g} s",
                    fix=f"wait for it{stop}, or raise ${MUTEX_TIMEOUT_ENV}",
                ) from None
            time.sleep(0.05)


def _user(uid: int) -> str:
    """`uid 1001 (alice)`, or `uid 1001` when it has no name."""
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _shared_mode(directory: Path) -> int:
    """The mutex file's mode: readable by everyone who can write `directory` (whoever can write the
    project can race this user's writes, and `flock` needs only a read-only descriptor), by no one
    else."""
    try:
        mode = os.stat(directory).st_mode
    except OSError:
        return 0o600
    return 0o600 | (0o040 if mode & stat.S_IWGRP else 0) | (0o004 if mode & stat.S_IWOTH else 0)


def _mark(fd: int) -> None:
    """Write this process's pid into a held mutex file (for a waiter's message), if it is open for
    writing."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        # opened read-only (a read-only directory's leftover mutex file): flock still serialises
        pass


def _mark_released(fd: int) -> None:
    """Clear the pid of a mutex file about to be unlocked (that stays behind)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)


class DirectoryMutex:
    """Exclusive mutex on a directory, as a mutex file inside it that is removed on release.

    `optional`: a directory this user cannot write (or a mutex file another user's) gives no lock
    instead of an error (`held` is then False). A mutex file that is a symlink or not a regular
    file is refused (`UsageError`).
    """

    def __init__(
        self,
        directory: Path,
        timeout: float,
        *,
        name: str = PROJECT_MUTEX_NAME,
        what: str = "updating",
        optional: bool = True,
    ) -> None:
        self.path = directory / name
        self.timeout, self.what, self.optional = timeout, what, optional
        self._fd: int | None = None
        self._owned = False  # created (or opened for writing) by us: ours to remove on release

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _open(self) -> int | None:
        for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
            try:
                fd = os.open(self.path, flags | _FILE_FLAGS, 0o600)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise UsageError(
                        f"{self.path} is a symlink, not kernlock's lock file",
                        fix=f"remove it (rm {self.path})",
                    ) from None
                if error.errno == errno.EISDIR:
                    raise UsageError(
                        f"{self.path} is a directory, not kernlock's lock file",
                        fix=f"remove it (rmdir {self.path}), or move it away",
                    ) from None
                if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS) or (
                    flags == os.O_RDONLY and error.errno == errno.ENOENT
                ):
                    continue
                raise
            self._owned = bool(flags & os.O_RDWR)
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                os.close(fd)
                raise UsageError(
                    f"{self.path} is not a regular file, not kernlock's lock file",
                    fix=f"remove it (rm {self.path})",
                )
            if self._owned and status.st_uid == os.geteuid():
                self._share(fd, status)
            return fd
        if not self.optional:
            raise UsageError(
                f"cannot create the lock file {self.path}", fix=f"make {self.path.parent} writable"
            )
        return None

    def _share(self, fd: int, status: os.stat_result) -> None:
        """Let everyone who can write the directory open (so wait on) this user's mutex file; the
        umask is not asked."""
        mode = _shared_mode(self.path.parent)
        try:
            if mode & 0o040:
                group = os.stat(self.path.parent).st_gid
                if status.st_gid != group:
                    # a member of the directory's group may give the file to it
                    os.fchown(fd, -1, group)
            if stat.S_IMODE(status.st_mode) != mode:
                os.fchmod(fd, mode)
        except OSError:
            # not a member of the directory's group: its members cannot open the file, as before
            pass

    def _unopenable(self) -> int | None:
        """The owner of a mutex file this user cannot open in a directory this user can write, else
        None.

        Such a file (another user's, 0600) is held or was left by that user: proceeding without it
        would let two writers of the project race, so it is waited on as a held lock."""
        try:
            owner = os.stat(self.path, follow_symlinks=False).st_uid
        except OSError:
            return None
        return owner if os.access(self.path.parent, os.W_OK) else None

    def acquire(self, deadline: float) -> DirectoryMutex:
        """Take the mutex (waiting until `deadline`); without a mutex file this user may create,
        take none."""
        while True:
            fd = self._open()
            if fd is None:
                owner = self._unopenable()
                if owner is None:
                    return self
                if time.monotonic() >= deadline:
                    raise ProjectBusyError(
                        f"{self.path} belongs to another user ({_user(owner)}) and cannot be "
                        "opened, so kernlock cannot tell whether a kernlock of theirs is "
                        f"{self.what}; waited {self.timeout:g} s for it to go",
                        fix=f"wait for it, or, when no kernlock of {_user(owner)} runs, "
                        f"remove it (rm {self.path})",
                    )
                time.sleep(0.05)
                continue
            _wait(fd, deadline, self.what, self.timeout)
            try:
                now = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            held = os.fstat(fd)
            if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                _mark(fd)
                self._fd = fd
                return self
            os.close(fd)  # the holder removed the file we waited on: take the new one

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self._owned:
                # before unlocking: a waiter on this file sees it gone and opens a new one
                os.unlink(self.path)
        except OSError:
            _mark_released(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class ProjectMutex:
    """Exclusive mutex on one project (its root directory) across processes and users' settings.

    First the mutex file beside the project's lock file (`.kernlock.mutex` in `root`), then the
    per-user one in the state directory (keyed by the root).
    """

    def __init__(self, root: Path, timeout: float | None = None) -> None:
        self.root = root.resolve()
        self.timeout = (
            seconds(MUTEX_TIMEOUT_ENV, DEFAULT_TIMEOUT, zero=True) if timeout is None else timeout
        )
        self._fd: int | None = None
        self._project: DirectoryMutex | None = None

    @property
    def name(self) -> str:
        """File name of the lock in the state directory."""
        return hashlib.sha256(str(self.root).encode()).hexdigest()[:24] + ".mutex"

    def __enter__(self) -> ProjectMutex:
        deadline = time.monotonic() + self.timeout
        project = DirectoryMutex(
            self.root, self.timeout, what=f"updating the project {self.root}"
        ).acquire(deadline)
        try:
            self._fd = self._state_lock(deadline)
        except BaseException:
            project.release()
            raise
        self._project = project
        return self

    def _state_lock(self, deadline: float) -> int:
        base_fd = _open_state_dir(state_dir())
        try:
            dir_fd = _open_state_dir(Path("locks"), base_fd)
        finally:
            os.close(base_fd)
        try:
            fd = os.open(
                self.name,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=dir_fd,
            )
        except OSError as error:
            raise _unusable_state_dir(error) from None
        finally:
            os.close(dir_fd)
        _wait(fd, deadline, f"updating the project {self.root}", self.timeout)
        _mark(fd)
        return fd

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        fd, self._fd = self._fd, None
        project, self._project = self._project, None
        if fd is not None:
            _mark_released(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        if project is not None:
            project.release()
