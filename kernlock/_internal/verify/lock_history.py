"""Where a project under git kept the lock a run recorded: the newest commit whose `kernels.lock`
has the sha256 the run's record names (`verify --against`'s fix), read with git itself."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

_MOST = 200  # commits of the lock's history looked at


def _git(cwd: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def commit_holding(lockfile: Path, sha256: str) -> str | None:
    """The newest of the last commits touching `lockfile` whose version of it hashes to `sha256`
    (None: not a git checkout, or no such commit)."""
    folder = lockfile.parent
    if not folder.is_dir():
        return None
    log = _git(folder, "log", f"-n{_MOST}", "--format=%H", "--", lockfile.name)
    for commit in (log or b"").decode().split():
        data = _git(folder, "show", f"{commit}:./{lockfile.name}")
        if data is not None and hashlib.sha256(data).hexdigest() == sha256:
            return commit
    return None
