"""File-system faults: a deeply nested lock, an export into a FIFO, a full or read-only disk are one line and a non-
zero exit, never a hang or a lost lock (issue 28)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kernlock
import kernlock._internal.runtime.importguard
from helpers import ACTIVATION, UNIVERSAL, cli, make_project, run_kernlock
from kernlock.errors import LockfileError
from kernlock.testing.hub import TestHub
from scripts.harness import child_env

pytestmark = pytest.mark.usefixtures("release_applied_lock")


@pytest.mark.parametrize("shape", ["array", "inline table"])
def test_a_deeply_nested_lock_is_one_line_and_exit_2(tmp_path: Path, monkeypatch, shape: str) -> None:
    project = make_project(tmp_path / "p")
    deep = "[" * 100_000 if shape == "array" else "{a = " * 100_000
    (project / "kernels.lock").write_text(f"version = 1\nx = {deep}\n")
    monkeypatch.chdir(project)
    for command, code in ((["verify"], 2), (["lock", "--migrate"], 2), (["run", "--", "true"], 2)):  # a bad lock: 2
        result = cli(*command, cwd=project)
        assert result.exit_code == code and "nested too deeply to read" in result.output, (command, result.output)
        lines = 3 if command == ["verify"] else 1  # verify's report: the check, the problem, its fix
        assert len(result.output.strip().splitlines()) == lines, result.output
    with pytest.raises(LockfileError, match=r"kernels\.lock: not valid TOML \(nested too deeply to read\)"):
        kernlock.apply()


@pytest.mark.slow
def test_export_into_a_fifo_a_pipe_or_a_missing_directory_never_hangs(locked, tmp_path: Path) -> None:
    project, _, entry = locked
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    nobody = run_kernlock("export", "-o", str(fifo), cwd=project, timeout=30)  # no reader: refused at once
    assert nobody.returncode == 2 and "no process is reading it; fix: start the reader first" in nobody.stderr
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    try:
        assert run_kernlock("export", "-o", str(fifo), cwd=project, timeout=60).returncode == 0
        assert entry.commit in reader.communicate(timeout=60)[0]
    finally:
        reader.kill()
    piped = subprocess.run(f"{sys.executable} -m kernlock export -o /dev/stdout | cat", shell=True, cwd=project,
                           capture_output=True, text=True, timeout=60, env=child_env())
    assert piped.returncode == 0 and entry.commit in piped.stdout, piped.stderr
    missing = cli("export", "-o", str(tmp_path / "no" / "such" / "kernels.lock.json"), cwd=project)
    assert missing.exit_code == 2 and f"{tmp_path}/no/such is not a directory; nothing was written; fix: create it" in missing.output


def _in_private_mount(script: str, mount: Path, options: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `script` (sh) in a private mount namespace where `mount` is a small tmpfs mounted with `options`."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a private tmpfs")
    mount.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not allowed here ({probe.stderr.decode().strip()})")
    return subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o {options} tmpfs {mount} && {script}"],
                          capture_output=True, text=True, timeout=timeout, env=child_env())


def test_a_full_disk_while_writing_the_lock_is_one_line_and_the_lock_stays(hub: TestHub, tmp_path: Path) -> None:
    source = make_project(tmp_path / "source", kernels=[f"{ACTIVATION}@v1"])
    assert cli("lock", cwd=source).exit_code == 0
    before = (source / "kernels.lock").read_bytes()
    (source / "pyproject.toml").write_text((source / "pyproject.toml").read_text().replace('@v1"', f'@v1", "{UNIVERSAL}@v1"'))
    disk = tmp_path / "disk"
    done = _in_private_mount(
        f"cp -a {source}/. {disk}/ && (dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null || true) && cd {disk} && "
        f"{sys.executable} -m kernlock lock; echo rc=$?; cmp kernels.lock {source}/kernels.lock && echo intact",
        disk, "size=1m")
    assert "rc=1" in done.stdout and "intact" in done.stdout and (source / "kernels.lock").read_bytes() == before
    [line] = done.stderr.strip().splitlines()
    assert f"cannot write {disk}/kernels.lock (No space left on device); it is unchanged; fix: free space" in line


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_a_full_or_read_only_cache_does_not_blame_the_network(locked, tmp_path: Path, disk: str) -> None:
    project, _, _ = locked
    home = tmp_path / "hf_home_mount"
    fill = f"(dd if=/dev/zero of={home}/filler bs=4k 2>/dev/null || true) && " if disk == "full" else ""
    done = _in_private_mount(f"{fill}cd {project} && HF_HOME={home} {sys.executable} -m kernlock sync", home,
                             "size=1m" if disk == "full" else "ro,size=1m")
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "network" not in line and "HF_ENDPOINT" not in line, line
    expected = "is full (No space left on device); fix: free space" if disk == "full" else "is not writable (Read-only file system"
    assert expected in line, line
