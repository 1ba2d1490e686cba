"""`atomic_write`: all or nothing, through symlinks, keeping modes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernlock._internal.fs.atomic import atomic_write
from kernlock.errors import WriteError


def test_a_symlink_is_followed_and_the_mode_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.lock"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "kernels.lock"
    link.symlink_to(real)
    atomic_write(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640


def test_a_failed_write_leaves_the_old_bytes_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kernels.lock"
    path.write_bytes(b"old")
    fired = []

    def broken_replace(source: str, destination: str) -> None:
        fired.append(destination)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(WriteError, match=rf"cannot write {path} \(No space left on device\); it is unchanged; fix: free space"):
        atomic_write(path, b"new")
    assert fired == [path]
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["kernels.lock"]


def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        atomic_write(tmp_path / "new.lock", "x")
    finally:
        os.umask(previous)
    assert (tmp_path / "new.lock").stat().st_mode & 0o777 == 0o640
