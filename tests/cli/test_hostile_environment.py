"""Hostile or broken surroundings (issue 36 B, medium and low): each is one line naming the problem and its fix,
a non-zero exit, never a traceback, a hang or a file changed that the command does not name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kernlock
from helpers import (
    ACTIVATION,
    CPU,
    UNIVERSAL,
    LockedProjectFactory,
    cli,
    make_project,
    run_kernlock,
)
from kernlock.errors import LockfileError
from kernlock.testing.hub import TestHub

pytestmark = pytest.mark.usefixtures("release_applied_lock")


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
    from kernlock._internal.lockfile.read_bytes import LOCK_SIZE_LIMIT

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


# ---------------------------------------------------------------- the project mutex in a team's shared checkout

needs_second_user = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                       reason="needs root and setpriv to act as two members of a group")
ALICE, BOB, TEAM = 61011, 61012, 61010  # two members of the project's group (setpriv needs no passwd entry)
HOLD = ("import sys, time; from pathlib import Path; from kernlock._internal.fs.mutex import ProjectMutex\n"
        "with ProjectMutex(Path('.')):\n    print('held', flush=True); sys.stdin.read()\n")


@pytest.fixture
def team_project() -> Iterator[Path]:
    """A project directory every member of TEAM can write (setgid 2775), outside the private pytest tree."""
    top = Path(tempfile.mkdtemp(prefix="kernlock-team-"))
    top.chmod(0o755)
    project = make_project(top / "p")
    for uid in (ALICE, BOB):
        (top / str(uid)).mkdir(mode=0o700)
        os.chown(top / str(uid), uid, TEAM)
    os.chown(project, 0, TEAM)
    project.chmod(0o2775)
    os.chown(project / "pyproject.toml", 0, TEAM)
    (project / "pyproject.toml").chmod(0o664)
    try:
        yield project
    finally:
        shutil.rmtree(top)


def _as(uid: int, project: Path, *command: str) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={TEAM}", "--clear-groups", *command]


def _env(uid: int, project: Path) -> dict[str, str]:
    home = project.parent / str(uid)
    return {**os.environ, "HOME": str(home), "KERNLOCK_STATE_DIR": str(home / "state"),
            "KERNLOCK_CACHE_DIR": str(home / "cache"), "HF_HUB_CACHE": str(home / "hub"), "KERNLOCK_MUTEX_TIMEOUT": "2"}


def _python(uid: int, project: Path, code: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(_as(uid, project, sys.executable, "-c", "import os; os.umask(0o002)\n" + code), cwd=project,
                          env=_env(uid, project), capture_output=True, text=True, timeout=60, **kwargs)


@needs_second_user
@pytest.mark.slow
def test_another_members_held_project_lock_is_waited_on_and_its_pid_never_offered_to_kill(team_project: Path) -> None:
    project = team_project
    bob = subprocess.Popen(_as(BOB, project, sys.executable, "-c", "import os; os.umask(0o002)\n" + HOLD), cwd=project,
                           env=_env(BOB, project), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert bob.stdout is not None and bob.stdout.readline() == "held\n"
        started = time.monotonic()
        alice = subprocess.run(_as(ALICE, project, sys.executable, "-m", "kernlock", "lock"), cwd=project,
                               env=_env(ALICE, project), capture_output=True, text=True, timeout=60)
        line = _one_line(alice.stderr)  # before the fix: Bob's 0600 file was skipped, and Alice wrote the lock
        assert alice.returncode == 1 and time.monotonic() - started >= 2, alice
        assert f"another user's kernlock (uid {BOB}, which says it is pid " in line and "fix: wait for it" in line, line
        assert "kill" not in line
        assert not (project / "kernels.lock").exists()
    finally:
        bob.communicate("", timeout=60)
    code = "from pathlib import Path; from kernlock._internal.fs.mutex import ProjectMutex\nwith ProjectMutex(Path('.')): print('locked')"
    assert _python(ALICE, project, code).stdout == "locked\n"  # released: Alice takes it


@needs_second_user
def test_another_members_unreadable_project_lock_file_is_waited_on_not_skipped(team_project: Path) -> None:
    left = team_project / ".kernlock.mutex"
    left.write_text("4242\n")  # left by Bob, private to him (as kernlock made it before)
    os.chown(left, BOB, TEAM)
    left.chmod(0o600)
    code = ("from pathlib import Path; from kernlock._internal.fs.mutex import ProjectMutex\n"
            "from kernlock.errors import KernlockError\n"
            "try:\n    with ProjectMutex(Path('.'), timeout=1): print('locked')\n"
            "except KernlockError as error: print(error)")
    refused = _python(ALICE, team_project, code).stdout.strip()
    assert refused.startswith(f"{left} belongs to another user (uid {BOB}) and cannot be opened"), refused
    fix = refused.split("fix: ", 1)[1]
    assert f"remove it (rm {left})" in fix and "kill" not in refused
    assert subprocess.run(_as(ALICE, team_project, "rm", str(left)), cwd=team_project).returncode == 0  # the fix
    assert _python(ALICE, team_project, code).stdout == "locked\n"


def test_a_project_lock_file_that_is_a_directory_is_one_line_and_exit_2(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=["kernels-community/activation@v1"], targets=[CPU])
    (project / ".kernlock.mutex").mkdir()
    refused = cli("lock", cwd=project)  # was: IsADirectoryError
    line = _one_line(refused.output)
    assert refused.exit_code == 2 and f"{project}/.kernlock.mutex is a directory, not kernlock's lock file" in line, line
    assert f"fix: remove it (rmdir {project}/.kernlock.mutex)" in line
    (project / ".kernlock.mutex").rmdir()  # the fix
    assert cli("lock", cwd=project).exit_code == 0


# ---------------------------------------------------------------- project files that are links into another project


@pytest.mark.parametrize("linked", ["kernels.lock", "pyproject.toml"])
def test_a_project_file_linked_into_another_project_is_never_written_through(
        locked_project: LockedProjectFactory, tmp_path: Path, linked: str) -> None:
    other = locked_project([ACTIVATION], [CPU], root=tmp_path / "other").path
    before = {name: (other / name).read_bytes() for name in ("kernels.lock", "pyproject.toml")}
    here = make_project(tmp_path / "here", kernels=[ACTIVATION], targets=[CPU])
    if linked == "kernels.lock":
        (here / "kernels.lock").symlink_to("../other/kernels.lock")  # as a cloned repo would commit it
    else:
        (here / "pyproject.toml").unlink()
        (here / "pyproject.toml").symlink_to("../other/pyproject.toml")
    refused = cli("lock", f"{UNIVERSAL}@v1", cwd=here)  # before the fix: the other project's file was replaced
    line = _one_line(refused.output)
    assert refused.exit_code == 2, line
    assert f"refusing to write through {here / linked}: it is a symlink to {other / linked}, outside the project" in line
    assert {name: (other / name).read_bytes() for name in before} == before
    fix = line.split("fix: ", 1)[1]
    copy = fix.split("`")[1]
    assert copy == f"cp --remove-destination {other / linked} {here / linked}"
    subprocess.run(copy, shell=True, check=True)  # the fix, as printed
    assert cli("lock", f"{UNIVERSAL}@v1", cwd=here).exit_code == 0
    assert {name: (other / name).read_bytes() for name in before} == before
    assert UNIVERSAL in (here / "kernels.lock").read_text()


def test_a_lock_linked_within_the_project_is_still_written_through(locked_project: LockedProjectFactory,
                                                                   tmp_path: Path) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    (project / "locks").mkdir()
    (project / "kernels.lock").rename(project / "locks" / "kernels.lock")
    (project / "kernels.lock").symlink_to("locks/kernels.lock")
    assert cli("lock", f"{UNIVERSAL}@v1", cwd=project).exit_code == 0
    assert (project / "kernels.lock").is_symlink() and UNIVERSAL in (project / "locks" / "kernels.lock").read_text()


# ---------------------------------------------------------------- a download lock someone holds


@pytest.mark.slow
def test_a_held_download_lock_ends_sync_and_a_cold_apply_by_the_hub_deadline(
        locked_project: LockedProjectFactory, monkeypatch) -> None:
    from kernlock._internal.fetch.download_lock import file_lock_name
    from kernlock._internal.store.hub_cache import hub_cache_dir, repo_folder

    project, lock = locked_project([f"{ACTIVATION}@v1"], [CPU])
    [kernel] = lock.kernels
    variant = kernel.variant_for(lock.targets[0])
    locks = hub_cache_dir() / ".locks" / repo_folder(kernel.repo)
    locks.mkdir(parents=True, exist_ok=True)
    names = [file_lock_name(kernel.commit, variant.name, f.path) for f in variant.files]
    holder = subprocess.Popen(  # holds every per-file lock of the variant, as a stopped download would
        [sys.executable, "-c", "import sys\nfrom filelock import FileLock\n"
         "held = [FileLock(p, mode=0o664) for p in sys.argv[1:]]\nfor h in held: h.acquire()\n"
         "print('held', flush=True); sys.stdin.read()", *(str(locks / n) for n in names)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        env = {"KERNLOCK_HUB_DEADLINE": "2"}
        load = f"import kernels, kernlock; kernlock.apply(); kernels.get_kernel({kernel.repo!r}, version=1)"
        for command in (["-m", "kernlock", "sync"], ["-c", load]):
            started = time.monotonic()
            ended = subprocess.run([sys.executable, *command], cwd=project, env={**os.environ, **env},
                                   capture_output=True, text=True, timeout=60)  # before the fix: waited forever
            assert time.monotonic() - started < 30 and ended.returncode != 0, ended
            assert "has held the download lock" in ended.stderr and "for over 2 s ($KERNLOCK_HUB_DEADLINE)" in ended.stderr
            if command[0] == "-m":
                assert "fix: wait for it and run the command again" in _one_line(ended.stderr)
    finally:
        holder.communicate("", timeout=60)
    assert cli("sync", cwd=project).exit_code == 0  # released: the same sync works


# ---------------------------------------------------------------- a Hub whose listing never ends


@pytest.mark.parametrize("page", [[], "one entry"])
def test_a_listing_that_never_ends_is_refused_by_pages_and_time(hub: TestHub, tmp_path: Path, monkeypatch,
                                                                 page: object) -> None:
    from kernlock._internal.hub import client

    project = make_project(tmp_path / "p", kernels=[f"{UNIVERSAL}@v1"], targets=[CPU])
    entry = {"type": "directory", "path": "build/x", "oid": "0" * 40, "size": 0}  # skipped: not a file
    hub.add_fault("pages", match="/tree/", times=10**6, body=[] if page == [] else [entry])
    if page != []:
        monkeypatch.setattr(client, "MAX_PAGES", 40)  # the real bound, 1 000 pages, is reached the same way
    started = time.monotonic()
    refused = cli("lock", cwd=project)  # before the fix: paged until killed
    line = _one_line(refused.output)
    assert refused.exit_code == 1 and "did not end after" in line and "fix: check HF_ENDPOINT" in line, line
    assert time.monotonic() - started < 60 and 0 < hub.fired["pages"] <= 41  # the fault fired, and was cut short
    assert not (project / "kernels.lock").exists()
    hub._faults.clear()
    monkeypatch.setenv("KERNLOCK_HUB_DEADLINE", "1")  # and by time, whatever the pages hold
    hub.add_fault("pages", match="/tree/", times=10**6, body=[entry])
    hub.latency = 0.1
    started, pages = time.monotonic(), hub.fired["pages"]
    timed = cli("lock", cwd=project)
    line = _one_line(timed.output)  # the listing as a whole ends by the deadline: between pages, or in the last one
    assert timed.exit_code == 1 and ("did not end within 1 s" in line or "within 1 s, KERNLOCK_HUB_DEADLINE" in line)
    assert time.monotonic() - started < 10 and 0 < hub.fired["pages"] - pages < 20, line


# ---------------------------------------------------------------- directories kernlock cannot use


@pytest.mark.parametrize("state", ["/dev/null", "/dev/null/state", "missing-parent-file"])
def test_an_unusable_state_directory_is_one_line_and_exit_2(hub: TestHub, tmp_path: Path, monkeypatch,
                                                            state: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{UNIVERSAL}@v1"], targets=[CPU])
    if state == "missing-parent-file":
        (tmp_path / "file").write_text("")
        state = str(tmp_path / "file" / "deeper" / "state")
    monkeypatch.setenv("KERNLOCK_STATE_DIR", state)
    refused = cli("lock", cwd=project)  # was: NotADirectoryError
    line = _one_line(refused.output)
    assert refused.exit_code == 2 and f"kernlock's state directory {state} cannot be used (Not a directory" in line
    assert "fix: set $KERNLOCK_STATE_DIR to a directory of your own" in line
    assert not (project / "kernels.lock").exists() and not (project / ".kernlock.mutex").exists()
    monkeypatch.setenv("KERNLOCK_STATE_DIR", str(tmp_path / "state"))  # the fix
    assert cli("lock", cwd=project).exit_code == 0


@needs_second_user
def test_a_state_directory_without_access_is_one_line_and_exit_2(team_project: Path) -> None:
    closed = team_project.parent / "closed"
    closed.mkdir(mode=0o700)  # root's: Alice may not enter it
    env = {**_env(ALICE, team_project), "KERNLOCK_STATE_DIR": str(closed / "state")}
    os.chown(team_project / "pyproject.toml", ALICE, TEAM)
    refused = subprocess.run(_as(ALICE, team_project, sys.executable, "-m", "kernlock", "remove", "x/y"),
                             cwd=team_project, env=env, capture_output=True, text=True, timeout=60)
    line = _one_line(refused.stderr)
    assert refused.returncode == 2 and f"state directory {closed}/state cannot be used (Permission denied" in line, line


def test_vendor_into_a_directory_that_cannot_be_made_is_one_line_and_exit_2(locked_project: LockedProjectFactory,
                                                                           tmp_path: Path) -> None:
    project = locked_project([f"{UNIVERSAL}@v1"], [CPU]).path
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file" / "vendor", Path("/proc/kernlock-vendor")):  # a file in the way; no write access
        refused = cli("vendor", str(out), cwd=project)  # was: a traceback
        line = _one_line(refused.output)
        assert refused.exit_code == 2 and f"cannot create the vendor directory {out} (" in line, line
        assert "nothing was written; fix: vendor into a directory you can write" in line
    assert cli("vendor", str(tmp_path / "vendor"), cwd=project).exit_code == 0


# ---------------------------------------------------------------- low: settings, exit codes and messages


@pytest.mark.parametrize("name", ["HF_HUB_DOWNLOAD_TIMEOUT", "HF_HUB_ETAG_TIMEOUT"])
def test_a_hub_timeout_huggingface_hub_cannot_read_is_one_line_and_exit_2(locked_project: LockedProjectFactory,
                                                                           name: str) -> None:
    project = locked_project([f"{UNIVERSAL}@v1"], [CPU]).path
    for command in (["sync"], ["lock", "--upgrade"], ["verify", "--remote"], ["run", "--", "true"]):
        refused = run_kernlock(*command, cwd=project, env={name: "abc"})  # was: a ValueError traceback
        line = _one_line(refused.stderr)
        assert refused.returncode == 2 and f"${name}='abc' is not a whole number of seconds" in line, (command, line)
        assert "fix: set it to e.g. 10 or unset it" in line
    assert run_kernlock("sync", cwd=project, env={name: "30"}).returncode == 0


@pytest.mark.slow
def test_outdated_with_the_hub_unreachable_is_not_up_to_date(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{UNIVERSAL}@v1"], [CPU]).path
    hub.stop()
    for args in ([], ["--json"]):
        checked = run_kernlock("outdated", *args, cwd=project, env={"KERNLOCK_HUB_DEADLINE": "2"})
        line = _one_line(checked.stderr)  # was: exit 0, an error only in the table's STATUS column
        assert checked.returncode == 1 and "1 of 1 locked kernels could not be checked (" in line, (args, line)
        assert "cannot reach the Hub" in line and "fix: check the network, HF_ENDPOINT and HF_TOKEN" in line


@pytest.mark.parametrize("module", ["kernels", "transformers"])
def test_the_stop_for_a_python_without_kernlock_names_the_import_it_stopped(tmp_path: Path, module: str) -> None:
    import kernlock._internal.runtime

    startup = Path(kernlock._internal.runtime.__file__).parent / "_startup"
    (tmp_path / "kernlock").mkdir()
    (tmp_path / "kernlock" / "__init__.py").write_text("raise ImportError('not in this environment')\n")
    stopped = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": f"{startup}:{tmp_path}", "KERNLOCK_APPLY": "1"})
    line = _one_line(stopped.stderr)
    assert stopped.returncode == 1 and "cannot import kernlock (not in this environment)" in line, line
    assert f"so the import of {module} is stopped: it would load Hub kernels without the lock; install kernlock" in line
    assert "kernels would load kernels" not in line


@pytest.mark.slow
def test_verify_remote_is_bounded_by_one_hub_deadline_as_a_whole(hub: TestHub, locked_project: LockedProjectFactory,
                                                                  monkeypatch) -> None:
    project, lock = locked_project([f"{ACTIVATION}@v1", f"{UNIVERSAL}@v1"], [CPU])
    fetched = sum(1 for k in lock.kernels for v in k.variants for f in v.files)
    assert fetched >= 4
    hub.add_fault("stall", match=r"/resolve/", times=10**6)  # every file fetch hangs
    started = time.monotonic()
    checked = run_kernlock("verify", "--remote", cwd=project, env={"KERNLOCK_HUB_DEADLINE": "2"}, timeout=300)
    took = time.monotonic() - started  # before the fix: about 2 s per fetched file
    assert checked.returncode == 1 and took < 8, (took, checked.stdout)  # one deadline, and start-up
    assert "the remote check did not finish within 2 s ($KERNLOCK_HUB_DEADLINE)" in checked.stdout, checked.stdout
    assert "fix: check the network and HF_ENDPOINT, or raise $KERNLOCK_HUB_DEADLINE" in checked.stdout


def test_a_lock_that_cannot_be_written_leaves_pyproject_as_it_was(locked_project: LockedProjectFactory,
                                                                  monkeypatch) -> None:
    import errno

    from kernlock._internal.fs import atomic

    project = locked_project([f"{ACTIVATION}@v1"], [CPU]).path
    before = {name: (project / name).read_bytes() for name in ("pyproject.toml", "kernels.lock")}
    replace = atomic._replace

    def full_for_the_lock(target: Path, payload: bytes) -> None:
        if target.name == "kernels.lock":  # the disk has room for pyproject.toml's few bytes, not for the lock
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        replace(target, payload)

    monkeypatch.setattr(atomic, "_replace", full_for_the_lock)
    refused = cli("lock", f"{UNIVERSAL}@v1", cwd=project)
    line = _one_line(refused.output)
    assert refused.exit_code == 1 and "kernels.lock (No space left on device); it is unchanged" in line, line
    assert {name: (project / name).read_bytes() for name in before} == before  # was: pyproject kept the new spec


def test_kernlock_run_refuses_an_allowlisted_entry_the_project_no_longer_trusts(
        locked_project: LockedProjectFactory) -> None:
    from helpers import UNTRUSTED

    project, lock = locked_project([f"{UNTRUSTED}@v1"], extra=f'trust = ["{UNTRUSTED}"]\n')
    assert lock.kernels[0].trust == "allowlist"
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'trust = ["{UNTRUSTED}"]', "trust = []"))
    ran = run_kernlock("run", "--", sys.executable, "-c", "print('the command ran')", cwd=project)
    line = _one_line(ran.stderr)  # was: the command ran, its processes applying the lock as named (no trust check)
    assert ran.returncode != 0 and "the command ran" not in ran.stdout, ran
    assert f'{UNTRUSTED}@v1 is locked as trust = "allowlist" but {pyproject} [tool.kernlock] trust does not list' in line
    assert f"fix: review it and add '{UNTRUSTED}' to [tool.kernlock] trust" in line


def test_a_kernlock_target_that_is_not_this_machine_is_said_by_apply_and_verify(
        locked_project: LockedProjectFactory) -> None:
    from helpers import CUDA_X86

    project = locked_project([f"{UNIVERSAL}@v1"], [CPU, CUDA_X86]).path
    forged = {"KERNLOCK_TARGET": CUDA_X86}
    note = f"$KERNLOCK_TARGET={CUDA_X86} stands in for this machine ({CPU}): the builds locked for {CUDA_X86} load here"
    applied = subprocess.run([sys.executable, "-c", "import kernlock; kernlock.apply(); print('applied')"], cwd=project,
                             env={**os.environ, **forged}, capture_output=True, text=True, timeout=120)
    assert applied.returncode == 0 and applied.stdout.split() == ["applied"], applied.stderr
    assert f"kernlock: warning: {note}" in applied.stderr  # was: nothing said
    verified = run_kernlock("verify", cwd=project, env=forged)
    assert verified.returncode == 0 and note in verified.stdout, verified.stdout
    for quiet in ({"KERNLOCK_TARGET": CPU}, {}):  # this machine's own target, or none: nothing to say
        same = subprocess.run([sys.executable, "-c", "import kernlock; kernlock.apply()"], cwd=project,
                              env={**{k: v for k, v in os.environ.items() if k != "KERNLOCK_TARGET"}, **quiet},
                              capture_output=True, text=True, timeout=120)
        assert same.returncode == 0 and "stands in for this machine" not in same.stderr, same.stderr


@pytest.mark.parametrize("how", ["another user's", "group-writable", "in a group-writable directory"])
def test_a_sigstore_trusted_root_someone_else_controls_is_refused(hub: TestHub, tmp_path: Path, monkeypatch,
                                                                 how: str) -> None:
    from kernlock._internal.rules.signatures import TRUSTED_ROOT_ENV

    if how == "another user's" and os.geteuid() != 0:
        pytest.skip("needs root to give the root file to another user")
    theirs = tmp_path / "shared" / "trusted_root.json"
    theirs.parent.mkdir()
    shutil.copy(os.environ[TRUSTED_ROOT_ENV], theirs)  # the test Sigstore's root, as a teammate's copy
    if how == "another user's":
        os.chown(theirs, 65534, 65534)
    elif how == "group-writable":
        theirs.chmod(0o664)
    else:  # the team set-up (setgid 2775): the file is yours, but a group member can rename another over it
        theirs.chmod(0o644)
        theirs.parent.chmod(0o2775)
    monkeypatch.setenv(TRUSTED_ROOT_ENV, str(theirs))
    project = make_project(tmp_path / "p", ["kernels-community/signed@v1"], targets=[CPU])
    refused = cli("lock", cwd=project)  # was: locked, that root's signatures recorded as kernels-community's
    line = _one_line(refused.output)
    assert refused.exit_code == 1 and f"refusing the Sigstore trusted root {theirs} (named by ${TRUSTED_ROOT_ENV})" in line
    assert not (project / "kernels.lock").exists()
    fix = line.split("fix: ", 1)[1]
    install = fix.split("`")[1]
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    subprocess.run(install, shell=True, check=True, env=os.environ)  # the fix, as printed
    monkeypatch.setenv(TRUSTED_ROOT_ENV, str(tmp_path / "home" / ".config" / "kernlock" / "trusted_root.json"))
    assert cli("lock", cwd=project).exit_code == 0
