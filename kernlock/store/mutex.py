"""The per-project cross-process lock that serialises `kernlock lock`/`remove`.

It lives in a private per-user state directory (`$KERNLOCK_STATE_DIR`, else
`$XDG_STATE_HOME/kernlock`, else `~/.local/state/kernlock`), created 0700 and
checked on the opened descriptor, so another user can neither block it nor
make it fail. The holder writes its pid into the lock file; a waiter gives up
after a timeout (`$KERNLOCK_LOCK_TIMEOUT` seconds, default 300) with a message
naming that pid.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from pathlib import Path
from types import TracebackType

from kernlock.errors import LockTimeoutError, UsageError
from kernlock.store.private import NotPrivateError, open_private_dir
from kernlock.settings import LOCK_TIMEOUT_ENV, STATE_DIR_ENV, path, seconds

DEFAULT_TIMEOUT = 300.0


def state_dir() -> Path:
    """The private per-user directory for kernlock's state (not created here)."""
    return path(STATE_DIR_ENV) or (path("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "kernlock"


def _open_state_dir(directory: Path, parent_fd: int | None = None) -> int:
    """`open_private_dir`, with the fix when the state directory is not private."""
    try:
        return open_private_dir(directory, parent_fd)
    except NotPrivateError as error:
        raise UsageError(
            f"kernlock's state directory {state_dir()} is {error}; "
            f"set ${STATE_DIR_ENV} to a directory only you can write"
        ) from None


class ProjectLock:
    """Exclusive lock on one project (keyed by its root directory) across processes."""

    def __init__(self, root: Path, timeout: float | None = None) -> None:
        self.root = root.resolve()
        self.timeout = seconds(LOCK_TIMEOUT_ENV, DEFAULT_TIMEOUT, zero=True) if timeout is None else timeout
        self._fd: int | None = None

    @property
    def name(self) -> str:
        """File name of the lock in the state directory."""
        return hashlib.sha256(str(self.root).encode()).hexdigest()[:24] + ".lock"

    def __enter__(self) -> ProjectLock:
        base_fd = _open_state_dir(state_dir())
        try:
            dir_fd = _open_state_dir(Path("locks"), base_fd)
        finally:
            os.close(base_fd)
        try:
            fd = os.open(self.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                    os.close(fd)
                    who = f"pid {holder}" if holder.isdigit() else "an unknown process"
                    stop = f", or stop it (kill {holder})" if holder.isdigit() else ""
                    raise LockTimeoutError(
                        f"another kernlock ({who}) has been updating the project {self.root} for over "
                        f"{self.timeout:g} s; wait for it{stop}, or raise ${LOCK_TIMEOUT_ENV}"
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
