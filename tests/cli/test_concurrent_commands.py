"""Concurrent and interrupted commands (issue 28 item 10): concurrent locks and vendors, a lock file left by a killed
lock, a read-only project for readers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import kernlock._internal.fetch.vendor
from helpers import CPU, LockedProjectFactory, cli, make_project, run_kernlock
from kernlock._internal.fs.mutex import PROJECT_MUTEX_NAME
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub

ACTIVATION = "kernels-community/activation@v1"


TAGGED = "kernels-community/tagged@v1"


def test_concurrent_locks_with_different_state_dirs_keep_both(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", targets=[CPU])
    hub.latency = 0.02
    procs = [  # two CI jobs on one checkout, each with its own per-user state
        subprocess.Popen([sys.executable, "-m", "kernlock", "lock", spec], cwd=project, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "KERNLOCK_STATE_DIR": str(tmp_path / f"state-{n}")})
        for n, spec in enumerate((ACTIVATION, TAGGED))
    ]
    outcomes = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outcomes
    assert {k.spec for k in load_lockfile(project / "kernels.lock").kernels} == {ACTIVATION, TAGGED}
    assert f'"{ACTIVATION}"' in (project / "pyproject.toml").read_text()
    assert f'"{TAGGED}"' in (project / "pyproject.toml").read_text()
    assert not (project / PROJECT_MUTEX_NAME).exists()  # the project's lock file is removed on release


@pytest.mark.slow
def test_concurrent_vendor_into_one_directory_waits_instead_of_failing(
    locked_project: LockedProjectFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    out = tmp_path / "vendor"
    real_replace = os.replace
    other: dict[str, object] = {}

    def second_vendor() -> None:
        try:
            other["report"] = kernlock._internal.fetch.vendor.vendor(out, project)
        except BaseException as error:  # noqa: BLE001 (reported by the assertion below)
            other["error"] = error

    thread = threading.Thread(target=second_vendor)

    def replace(source: str | os.PathLike[str], destination: str | os.PathLike[str], **kwargs: object) -> None:
        if Path(source).name.startswith(".staging-") and not thread.is_alive() and "started" not in other:
            other["started"] = True  # the first run is about to move its staged variant in: run a second one now
            thread.start()
            thread.join(timeout=3)
        real_replace(source, destination, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)
    first = kernlock._internal.fetch.vendor.vendor(out, project)  # was: OSError: [Errno 39] Directory not empty
    thread.join(timeout=60)
    assert "error" not in other, other.get("error")
    assert first.variants == other["report"].variants == 1  # type: ignore[attr-defined]
    assert not (out / kernlock._internal.fetch.vendor.VENDOR_MUTEX_NAME).exists()
    assert not [p.name for p in out.iterdir() if p.name.startswith((".staging-", ".damaged-"))]
    monkeypatch.setattr(os, "replace", real_replace)
    verified = cli("vendor", str(out), cwd=project)  # the directory matches the lock
    assert verified.exit_code == 0, verified.output


def _as_reader(project: Path) -> list[str]:
    """A command prefix under which `project` is read-only (root: no CAP_DAC_OVERRIDE; else chmod)."""
    project.chmod(0o555)
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to drop root's CAP_DAC_OVERRIDE")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]


def test_a_read_only_project_still_works_for_readers(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    prefix = _as_reader(project)
    try:
        probe = subprocess.run([*prefix, "touch", str(project / "probe")], capture_output=True)
        assert probe.returncode != 0, "the project directory is still writable"
        elsewhere = tmp_path / "elsewhere.lock"
        for args in (["show"], ["verify"], ["lock", "--check"], ["lock", "--lockfile", str(elsewhere)]):
            ran = subprocess.run([*prefix, sys.executable, "-m", "kernlock", *args], cwd=project,
                                 capture_output=True, text=True, timeout=120)
            assert ran.returncode == 0, (args, ran.stdout, ran.stderr)
        assert elsewhere.is_file()
        assert not (project / PROJECT_MUTEX_NAME).exists()
    finally:
        project.chmod(0o755)


def test_a_lock_file_left_by_a_killed_lock_is_taken_over_and_removed(hub: TestHub, tmp_path: Path) -> None:
    """`kernlock lock` killed while it holds the project's lock leaves `.kernlock.mutex`; the next run takes it
    over (the kernel dropped the dead holder's lock) and removes it, as the README says."""
    project = make_project(tmp_path / "p", targets=[CPU])
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from kernlock._internal.fs.mutex import ProjectMutex\n"
         "with ProjectMutex(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)", str(project)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "KERNLOCK_STATE_DIR": str(tmp_path / "state")})
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait()
    assert (project / PROJECT_MUTEX_NAME).exists()  # the leftover
    done = run_kernlock("lock", ACTIVATION, cwd=project, env={"KERNLOCK_MUTEX_TIMEOUT": "5"})
    assert done.returncode == 0, done.stderr
    assert [k.spec for k in load_lockfile(project / "kernels.lock").kernels] == [ACTIVATION]
    assert not (project / PROJECT_MUTEX_NAME).exists()
