"""Hostile or broken surroundings (issue 36 B, medium and low): each is one line naming the problem and its fix,
a non-zero exit, never a traceback, a hang or a file changed that the command does not name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import kernlock
from helpers import cli, make_project
from kernlock.errors import LockfileError
from kernlock.runtime.apply import release


@pytest.fixture(autouse=True)
def _release() -> None:
    yield
    release()


def _one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


# ---------------------------------------------------------------- lock files that are no lock


@pytest.mark.parametrize("how", ["environment", "committed symlink"])
def test_a_lock_path_naming_a_device_is_refused_without_reading_it(tmp_path: Path, monkeypatch, how: str) -> None:
    project = make_project(tmp_path / "p")
    if how == "environment":
        monkeypatch.setenv("KERNLOCK_LOCKFILE", "/dev/zero")
    else:
        (project / "kernels.lock").symlink_to("/dev/zero")
    monkeypatch.chdir(project)
    for command in (["show"], ["sync"], ["export"], ["outdated"], ["run", "--", "true"]):
        result = cli(*command, cwd=project)  # before the fix: read /dev/zero until memory ran out
        line = _one_line(result.output)
        assert result.exit_code == 2 and "is not a regular file" in line and "fix: " in line, (command, line)
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 2 and "is not a regular file" in verified.output, verified.output
    with pytest.raises(LockfileError, match="is not a regular file"):
        kernlock.apply()


def test_a_lock_file_larger_than_any_lock_is_refused_unread(tmp_path: Path, monkeypatch) -> None:
    from kernlock.store.lockfile_io import LOCK_SIZE_LIMIT

    project = make_project(tmp_path / "p")
    with (project / "kernels.lock").open("wb") as sparse:
        sparse.truncate(LOCK_SIZE_LIMIT + 1)
    result = cli("show", cwd=project)
    assert result.exit_code == 2 and f"is larger than {LOCK_SIZE_LIMIT >> 20} MiB" in _one_line(result.output)


def test_a_deeply_nested_json_shaped_lock_is_one_line_and_exit_2(tmp_path: Path, monkeypatch) -> None:
    project = make_project(tmp_path / "p")
    (project / "kernels.lock").write_text("[" * 200_000)  # kernels' JSON lock starts with `[`: JSON's decoder recursed
    before = (project / "kernels.lock").read_bytes()
    monkeypatch.chdir(project)
    for command in (["show"], ["sync"], ["lock"], ["lock", "--migrate"], ["lock", "--upgrade"], ["run", "--", "true"]):
        result = cli(*command, cwd=project)
        assert result.exit_code == 2 and "fix: " in _one_line(result.output), (command, result.output)
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 2 and "RecursionError" not in verified.output, verified.output
    with pytest.raises(LockfileError, match="not a kernlock lock"):
        kernlock.apply()
    assert (project / "kernels.lock").read_bytes() == before
