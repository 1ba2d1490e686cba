"""The workspace: one project, one lock path, one per-project lock, and nothing silently re-resolved."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import CPU, UNTRUSTED, LockedProjectFactory, cli, make_project, run_kernlock
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub

ACTIVATION = "kernels-community/activation@v1"
TAGGED = "kernels-community/tagged@v1"
NOBODY = 65534


def one_line_error(result, code: int = 2) -> str:
    """The single `kernlock: error:` line of a failed command (no traceback)."""
    output = result.stderr if isinstance(result, subprocess.CompletedProcess) else result.output
    returncode = result.returncode if isinstance(result, subprocess.CompletedProcess) else result.exit_code
    assert returncode == code, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernlock: error: "), output
    return lines[0]


def applied_lockfile(project: Path, *args: str) -> subprocess.CompletedProcess:
    """Which lock `kernlock.apply()` binds in a fresh process started in `project` (or under `args`)."""
    code = "import kernlock; print(kernlock.apply().lock_path)"
    return subprocess.run([*args, sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- concurrency


def test_concurrent_locks_adding_different_kernels_keep_both(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", targets=[CPU])
    hub.latency = 0.02
    procs = [
        subprocess.Popen([sys.executable, "-m", "kernlock", "lock", spec], cwd=project,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for spec in (ACTIVATION, TAGGED)
    ]
    outcomes = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outcomes
    assert {k.spec for k in load_lockfile(project / "kernels.lock").kernels} == {ACTIVATION, TAGGED}
    assert cli("verify", cwd=project).exit_code == 0


def test_a_held_project_lock_times_out_naming_the_holder(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[ACTIVATION], targets=[CPU])
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from kernlock._internal.fs.mutex import ProjectMutex\n"
         "with ProjectMutex(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(60)", str(project)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        line = one_line_error(run_kernlock("lock", cwd=project, env={"KERNLOCK_MUTEX_TIMEOUT": "0.5"}), code=1)
        assert f"pid {holder.pid}" in line and f"kill {holder.pid}" in line and "KERNLOCK_MUTEX_TIMEOUT" in line
        assert not (project / "kernels.lock").exists()
    finally:
        holder.kill()
        holder.wait()
    assert run_kernlock("lock", cwd=project).returncode == 0  # the fix: wait for it (or stop it)


# ---------------------------------------------------------------- command-line options are remembered


def test_scan_and_trust_options_are_recorded_like_uv_add(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", targets=[CPU])
    (project / "train.py").write_text(f'model = load(attn_implementation="{TAGGED}")\n')
    assert cli("lock", "--scan", "train.py", f"{UNTRUSTED}@v1", "--trust", UNTRUSTED, cwd=project).exit_code == 0
    text = (project / "pyproject.toml").read_text()
    assert 'scan = ["train.py"]' in text and f'trust = ["{UNTRUSTED}"]' in text
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 0, verified.output
    before = (project / "kernels.lock").read_bytes()
    relocked = cli("lock", cwd=project)
    assert relocked.exit_code == 0, relocked.output
    assert (project / "kernels.lock").read_bytes() == before


# ---------------------------------------------------------------- where the lock is


def test_configured_lockfile_is_used_by_apply_and_run(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[ACTIVATION], targets=[CPU], extra='lockfile = "locks/k.lock"\n')
    assert cli("lock", cwd=project).exit_code == 0
    locked = project / "locks" / "k.lock"
    assert locked.is_file() and not (project / "kernels.lock").exists()
    assert cli("verify", cwd=project).exit_code == 0
    applied = applied_lockfile(project)
    assert applied.returncode == 0 and applied.stdout.strip() == str(locked), applied.stderr
    ran = applied_lockfile(project, sys.executable, "-m", "kernlock", "run", "--")
    assert ran.returncode == 0 and ran.stdout.strip() == str(locked), ran.stderr


@pytest.mark.parametrize("configured", ["absolute", "../outside.lock"])
def test_a_configured_lockfile_outside_the_project_is_refused(hub: TestHub, tmp_path: Path, configured: str) -> None:
    if configured == "absolute":
        configured = str(tmp_path / "elsewhere.lock")
    project = make_project(tmp_path / "p", kernels=[ACTIVATION], targets=[CPU], extra=f'lockfile = "{configured}"\n')
    line = one_line_error(cli("lock", cwd=project))
    assert "lies outside the project" in line and f"--lockfile {configured}" in line
    assert not (project / configured).exists()
    explicit = tmp_path / "explicit.lock"
    assert cli("lock", "--lockfile", str(explicit), cwd=project).exit_code == 0  # the fix: name it explicitly
    assert explicit.is_file()


def test_discovery_stops_at_the_project_root(hub: TestHub, tmp_path: Path) -> None:
    outer = make_project(tmp_path / "outer", kernels=[ACTIVATION], targets=[CPU])
    assert cli("lock", cwd=outer).exit_code == 0
    inner = make_project(outer / "inner", kernels=[TAGGED], targets=[CPU])
    applied = applied_lockfile(inner)
    assert applied.returncode == 1
    assert f"looked for {inner / 'kernels.lock'}" in applied.stderr and "run `kernlock lock`" in applied.stderr
    assert cli("lock", cwd=inner).exit_code == 0  # the fix
    assert applied_lockfile(inner).stdout.strip() == str(inner / "kernels.lock")


def test_verify_an_explicit_lock_outside_any_project(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".git").mkdir()
    shutil.copy(project / "kernels.lock", elsewhere / "copied.lock")
    result = cli("verify", "--lockfile", "copied.lock", cwd=elsewhere)
    assert result.exit_code == 0, result.output
    assert "ok   fresh (no pyproject.toml here" in result.output


# ---------------------------------------------------------------- discovered locks someone else controls


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside the private pytest tree (which other users cannot enter)."""
    directory = Path(tempfile.mkdtemp(prefix="kernlock-shared-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create files owned by another user")
def test_a_lock_owned_by_another_user_is_refused(locked_project: LockedProjectFactory) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    lock = project / "kernels.lock"
    os.chown(lock, NOBODY, NOBODY)
    applied = applied_lockfile(project)
    assert applied.returncode == 1
    assert f"refusing {lock}: it is owned by uid {NOBODY}" in applied.stderr and "KERNLOCK_LOCKFILE" in applied.stderr
    line = one_line_error(run_kernlock("show", cwd=project))
    assert "owned by uid" in line
    trusted = run_kernlock("show", "--lockfile", str(lock), cwd=project)  # the fix: name it explicitly
    assert trusted.returncode == 0, trusted.stderr
    named = subprocess.run([sys.executable, "-c", "import kernlock; print(kernlock.apply().lock_path)"], cwd=project,
                           capture_output=True, text=True, env={**os.environ, "KERNLOCK_LOCKFILE": str(lock)})
    assert named.returncode == 0, named.stderr


def test_a_lock_in_a_world_writable_directory_is_refused(locked_project: LockedProjectFactory) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    project.chmod(0o777)
    line = one_line_error(run_kernlock("show", cwd=project))
    assert "its directory is writable by every user" in line and "--lockfile" in line
    project.chmod(0o1777)  # sticky: only the owner may replace the lock
    assert run_kernlock("show", cwd=project).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_another_users_lock_state_neither_blocks_nor_breaks_kernlock(shared_dir: Path) -> None:
    from kernlock._internal.fs.mutex import ProjectMutex

    shared_state = shared_dir / "state"
    shared_state.mkdir(mode=0o700)
    os.chown(shared_state, NOBODY, NOBODY)
    env = {**os.environ, "KERNLOCK_STATE_DIR": str(shared_state)}
    code = "from pathlib import Path; from kernlock._internal.fs.mutex import ProjectMutex\nwith ProjectMutex(Path('.')): print('locked')"
    line = one_line_error(subprocess.run([sys.executable, "-m", "kernlock", "lock"], cwd=shared_dir, env=env,
                                         capture_output=True, text=True))
    assert f"state directory {shared_state} is owned by uid {NOBODY}" in line and "KERNLOCK_STATE_DIR" in line
    home = shared_dir / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    with ProjectMutex(shared_dir, timeout=0):  # root holds the project lock in its own state dir
        other = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-c", code],
            cwd=shared_dir, capture_output=True, text=True, timeout=60,
            env={**{k: v for k, v in os.environ.items() if k not in ("KERNLOCK_STATE_DIR", "XDG_STATE_HOME")}, "HOME": str(home)},
        )
    assert other.returncode == 0 and other.stdout.strip() == "locked", other.stderr
    assert (home / ".local" / "state" / "kernlock" / "locks").stat().st_mode & 0o777 == 0o700


# ---------------------------------------------------------------- never silently re-resolve


def git(project: Path, *args: str) -> subprocess.CompletedProcess:
    """Run git in `project` with a fixed identity."""
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=project,
                          capture_output=True, text=True, timeout=60)


def test_an_unreadable_lock_is_never_silently_re_resolved(locked_project: LockedProjectFactory) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    lock = project / "kernels.lock"
    conflicted = "<<<<<<< HEAD\n" + lock.read_text() + "=======\nversion = \"1.0\"\n>>>>>>> theirs\n"
    lock.write_text(conflicted)
    line = one_line_error(cli("lock", cwd=project))
    assert "merge-conflict markers" in line and "nothing was written" in line
    assert lock.read_text() == conflicted
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 2 and "fix: resolve the conflict by hand" in verified.output
    assert verified.output.count("merge-conflict markers") == 1  # the problem once, the fix once
    assert cli("lock", "--upgrade", cwd=project).exit_code == 0  # re-resolving everything works too
    assert cli("verify", cwd=project).exit_code == 0


def test_a_merge_conflict_fix_re_resolves_only_the_conflicted_entries(
        hub: TestHub, locked_project: LockedProjectFactory) -> None:
    """Both branches moved one pin: the printed fix re-resolves that entry and keeps every other pin."""
    project = locked_project([ACTIVATION, TAGGED], [CPU]).path
    repo = ACTIVATION.split("@")[0]
    assert git(project, "init", "-q", "-b", "main").returncode == 0
    assert git(project, "add", "-A").returncode == 0 and git(project, "commit", "-qm", "lock").returncode == 0
    for branch in ("theirs", "main"):
        if branch == "theirs":
            git(project, "checkout", "-qb", "theirs")
        else:
            git(project, "checkout", "-q", "main")
        advance_branch(hub.repo_path(repo), "v1")
        assert cli("lock", "-P", repo, cwd=project).exit_code == 0
        assert git(project, "commit", "-qam", f"move {repo} on {branch}").returncode == 0
    advance_branch(hub.repo_path(TAGGED.split("@")[0]), "v1")  # `--upgrade` would move this pin too
    before = load_lockfile(project / "kernels.lock")
    assert git(project, "merge", "theirs").returncode != 0
    line = one_line_error(cli("lock", cwd=project))
    moved = advance_branch(hub.repo_path(repo), "v1")  # the re-resolved entry takes the branch's head
    fix = line.rsplit("`", 2)[1]
    assert fix == f"git checkout --ours {project / 'kernels.lock'} && kernlock lock -P {repo}", line
    bin_dir = str(Path(sys.executable).parent)
    ran = subprocess.run(["bash", "-c", fix], cwd=project, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"]})
    assert ran.returncode == 0, ran.stderr
    after = load_lockfile(project / "kernels.lock")
    assert after.kernel(TAGGED).commit == before.kernel(TAGGED).commit  # kept
    assert after.kernel(ACTIVATION).commit == moved != before.kernel(ACTIVATION).commit
    assert cli("verify", cwd=project).exit_code == 0


@pytest.mark.parametrize("newer, readable", [("99.0", False), ("1.99", True)], ids=["major", "minor"])
def test_a_newer_lock_format_is_never_overwritten(locked_project: LockedProjectFactory, newer: str, readable: bool) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    lock = project / "kernels.lock"
    text = lock.read_text().replace('version = "1.0"', f'version = "{newer}"\nfuture-key = true', 1)
    lock.write_text(text)
    for args in (("lock",), ("lock", "--upgrade"), ("remove", ACTIVATION)):
        line = one_line_error(cli(*args, cwd=project))
        assert f"lock format version {newer} is newer" in line or f"lock format {newer}" in line
        assert "from its checkout or wheel" in line and "pip install kernlock" not in line
        assert lock.read_text() == text
    verified = run_kernlock("verify", cwd=project)
    if readable:  # a newer minor is read, with a warning naming what is ignored
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "written by a newer kernlock (lock format 1.99" in verified.stderr and "future-key" in verified.stderr
    else:
        assert verified.returncode == 2 and "upgrade kernlock" in verified.stdout


# ---------------------------------------------------------------- one-line errors instead of tracebacks


def test_a_lock_that_is_a_directory_is_a_one_line_error(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[ACTIVATION], targets=[CPU])
    (project / "kernels.lock").mkdir()
    verified = run_kernlock("verify", cwd=project)
    assert verified.returncode == 2 and "kernels.lock is a directory" in verified.stdout, verified
    for args in (("lock",), ("show",)):
        line = one_line_error(run_kernlock(*args, cwd=project))
        assert "kernels.lock is a directory" in line
    fix = line.split("; fix: ")[-1]
    assert fix.startswith("move it away (mv ")
    os.rename(project / "kernels.lock", project / "kernels.lock.bak")  # the fix
    assert cli("lock", cwd=project).exit_code == 0


def test_a_pyproject_that_is_not_utf8_is_a_one_line_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[ACTIVATION])
    (project / "pyproject.toml").write_bytes(b'[tool.kernlock]\nkernels = ["caf\xe9/x"]\n')
    line = one_line_error(run_kernlock("verify", cwd=project))
    assert "pyproject.toml: not valid UTF-8" in line and "save it as UTF-8" in line


def test_invalid_toml_is_a_config_error_on_python_310(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernlock._internal.project.config import load_project
    from kernlock.errors import ConfigError

    project = make_project(tmp_path / "p", kernels=[ACTIVATION])
    (project / "pyproject.toml").write_text("[tool.kernlock\nkernels = [\n")
    monkeypatch.setitem(sys.modules, "tomllib", None)  # what Python 3.10 has: no tomllib, tomlkit instead
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_project(project)


# ---------------------------------------------------------------- remove and --locked


def test_remove_drops_a_kernel_and_keeps_the_other_pins(locked_project: LockedProjectFactory) -> None:
    project = locked_project([ACTIVATION, TAGGED], [CPU]).path
    kept = {k.spec: k.commit for k in load_lockfile(project / "kernels.lock").kernels}[ACTIVATION]
    result = cli("remove", "kernels-community/tagged", cwd=project)
    assert result.exit_code == 0, result.output
    assert "1 removed" in result.output
    assert f'kernels = ["{ACTIVATION}"]' in (project / "pyproject.toml").read_text()
    assert {k.spec: k.commit for k in load_lockfile(project / "kernels.lock").kernels} == {ACTIVATION: kept}
    assert cli("verify", cwd=project).exit_code == 0
    line = one_line_error(cli("remove", "kernels-community/tagged", cwd=project))
    assert "is not declared in pyproject.toml (declared: kernels-community/activation@v1)" in line


def test_locked_refuses_a_stale_lock_until_it_is_relocked(locked_project: LockedProjectFactory) -> None:
    project = locked_project([ACTIVATION], [CPU]).path
    make_project(project, kernels=[ACTIVATION, TAGGED], targets=[CPU])
    command = ["run", "--locked", "--", sys.executable, "-c", "print('ran')"]
    line = one_line_error(run_kernlock(*command, cwd=project), code=1)
    assert "kernels.lock is stale" in line and f"{TAGGED} is not in the lock" in line
    assert line.endswith("run `kernlock lock`")
    assert one_line_error(run_kernlock("sync", "--locked", cwd=project), code=1) == line
    stale = subprocess.run([sys.executable, "-c", "import kernlock; kernlock.apply(locked=True)"], cwd=project,
                           capture_output=True, text=True)
    assert stale.returncode == 1 and "StaleLockError" in stale.stderr
    assert cli("lock", cwd=project).exit_code == 0  # the fix the message names
    ran = run_kernlock(*command, cwd=project)
    assert ran.returncode == 0 and ran.stdout.strip() == "ran", ran.stderr
    assert applied_lockfile(project).returncode == 0


def test_without_a_lock_each_command_says_so_once_and_json_gets_json(hub: TestHub, tmp_path: Path) -> None:
    """No lock: one line naming the lock path once (JSON under --json); `kernlock run` offers --lockfile."""
    import json

    project = make_project(tmp_path / "p", kernels=[ACTIVATION])
    (project / "kernels.lock").unlink(missing_ok=True)
    lock = str(project / "kernels.lock")
    for args in (("show",), ("sync",), ("outdated",), ("explain", ACTIVATION)):
        line = one_line_error(cli(*args, cwd=project))
        assert line.count(lock) == 1 and "create it with `kernlock lock`" in line
    for json_args in (("show", "--json"), ("sync", "--json"), ("lock", "--json", "a/b@")):
        result = cli(*json_args, cwd=project)
        error = json.loads(result.output)
        assert result.exit_code == error["error"]["exit_code"] == 2 and error["ok"] is False, result.output
        assert error["error"]["message"] and error["error"]["type"].endswith("Error")
    verified = cli("verify", cwd=project)
    assert verified.exit_code == 2 and verified.output.count("kernlock lock") == 1  # the fix once
    (project / "train.py").write_text("print('ran')\n")
    ran = run_kernlock("run", "--", sys.executable, "train.py", cwd=project)
    line = one_line_error(ran, code=1)
    assert line.count(lock) == 1 and "--lockfile" in line and "kernlock.apply" not in line
    assert run_kernlock("lock", cwd=project).returncode == 0  # the fix each names
    assert run_kernlock("run", "--", sys.executable, "train.py", cwd=project).stdout == "ran\n"


def test_kernlock_target_stands_in_for_this_environment_in_sync(
    locked_project: LockedProjectFactory, tmp_path: Path
) -> None:
    """`sync` works on `$KERNLOCK_TARGET` as `apply()` does, `--target` still wins, and `vendor` copies every locked
    target whatever the variable says (issue 27, item 14)."""
    import json

    from helpers import CUDA_X86, FA2

    project, lock = locked_project([FA2], [CPU, CUDA_X86])
    variant_of = {str(t): v.name for k in lock.kernels for v in k.variants for t in v.targets}
    env = {"KERNLOCK_TARGET": CUDA_X86}
    synced = run_kernlock("sync", "--json", cwd=project, env=env)
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    assert report["variants"] == 1 and {p.split(" ")[1].split("/")[0] for p in report["downloaded"]} == {variant_of[CUDA_X86]}, report
    again = json.loads(run_kernlock("sync", "--json", "--target", CPU, cwd=project, env=env).stdout)
    assert {p.split(" ")[1].split("/")[0] for p in again["downloaded"]} == {variant_of[CPU]}, again
    bad = run_kernlock("sync", cwd=project, env={"KERNLOCK_TARGET": "not-a-target"})
    assert bad.returncode == 2 and "not-a-target" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    vendored = run_kernlock("vendor", str(tmp_path / "vendor"), "--json", cwd=project, env=env)
    assert vendored.returncode == 0 and json.loads(vendored.stdout)["variants"] == 2, vendored.stdout + vendored.stderr


def test_verify_and_run_check_the_kernlock_target(locked_project: LockedProjectFactory) -> None:
    """A lock for this CPU only: with `$KERNLOCK_TARGET` naming an unlocked CUDA target, `verify` and `kernlock run`
    refuse it as `apply()` would, and `--target` still wins over the variable (issue 27, item 14)."""
    from helpers import CUDA_X86

    project = locked_project([ACTIVATION], [CPU]).path
    env = {"KERNLOCK_TARGET": CUDA_X86}
    assert run_kernlock("verify", cwd=project).returncode == 0
    refused = run_kernlock("verify", cwd=project, env=env)
    assert refused.returncode == 1 and CUDA_X86 in refused.stdout + refused.stderr
    assert run_kernlock("verify", "--target", CPU, cwd=project, env=env).returncode == 0
    ran = run_kernlock("run", "--", sys.executable, "-c", "print('ran')", cwd=project, env=env)
    assert ran.returncode != 0 and "ran" not in ran.stdout and f"kernlock lock --target {CUDA_X86}" in ran.stderr
