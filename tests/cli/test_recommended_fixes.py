"""Every suggested fix is run: the command an error recommends must succeed (fixes that do not fix, #18), and
change no project file it does not name (issue 36: a printed fix run blindly never overwrites or deletes)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import site
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest

import kernlock
import kernlock._internal.cli.options
from helpers import CPU, CUDA_X86, cli, make_project, patch_hub_client
from kernlock._internal.host import current_target
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.project.workspace import VENDOR_ENV
from kernlock._internal.store import hub_cache as cache
from kernlock.errors import (
    ConfigError,
    HubError,
    IntegrityError,
    LocalKernelError,
    LockfileError,
    LockfileNotFoundError,
    MissingFilesError,
    NoVariantError,
    ResolutionError,
    StaleLockError,
    TargetError,
    TrustError,
    UnlockedKernelError,
    UnsafeLockfileError,
    UsageError,
)
from kernlock.testing.fixtures import rev_parse, rewrite_branch
from kernlock.testing.hub import TestHub

FA2 = "kernels-community/flash-attn2"
TAGGED = "kernels-community/tagged"


def recommended(message: str) -> list[str]:
    """The `kernlock …` command quoted in an error message, as arguments."""
    commands = re.findall(r"`kernlock ([^`]+)`", message)
    assert commands, message
    return shlex.split(commands[0])


pytestmark = pytest.mark.usefixtures("release_applied_lock")


def test_an_unlocked_revision_is_locked_at_that_revision(hub: TestHub, tmp_path: Path) -> None:
    import kernels

    project = make_project(tmp_path / "p", kernels=[f"{TAGGED}@v1"])
    assert cli("lock", cwd=project).exit_code == 0
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(UnlockedKernelError) as raised:
        kernels.get_kernel(TAGGED, revision="dev")
    command = recommended(str(raised.value))
    assert command == ["lock", f"{TAGGED}@dev"]
    fixed = cli(*command, cwd=project)
    assert fixed.exit_code == 0, fixed.output
    kernlock.apply(project / "kernels.lock")
    assert kernels.get_kernel(TAGGED, revision="dev") is not None


def test_a_missing_target_is_added_by_the_recommended_lock(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    with pytest.raises(NoVariantError) as raised:
        kernlock.apply(project / "kernels.lock")
    fixed = cli(*recommended(str(raised.value)), cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert str(current_target()) in kernlock.apply(project / "kernels.lock").target


def test_a_version_without_a_build_here_is_told_to_lock_the_target_which_names_the_version(
        hub: TestHub, tmp_path: Path) -> None:
    """The locked commit has no build here: the fix is still locking this target (issue 46: every message names
    the same command), whose refusal names the version that has a build; pinning it covers this machine."""
    here = str(current_target())
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v1"], targets=[CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    with pytest.raises(NoVariantError) as raised:
        kernlock.apply(project / "kernels.lock")
    message = str(raised.value)
    assert f"has no build for {here}" in message and message.endswith(f"fix: `kernlock lock --target {here}`")
    verified = cli("verify", "--target", here, cwd=project)
    assert verified.exit_code == 1 and f"fix: kernlock lock --target {here}" in verified.output
    refused = cli(*recommended(message), cwd=project)
    assert refused.exit_code == 1 and f"fix: pin {FA2}@v4 in its spec and run `kernlock lock`, or drop the target" in refused.output
    pinned = (project / "pyproject.toml").read_text().replace(f"{FA2}@v1", f"{FA2}@v4")
    (project / "pyproject.toml").write_text(pinned)
    assert cli(*recommended(message), cwd=project).exit_code == 0
    assert here in kernlock.apply(project / "kernels.lock").target


def tamper(root: Path, path: str, how: str) -> None:
    """Damage one file of a variant directory: change it, delete it, or plant a module beside it."""
    target = root / path
    if how == "changed":
        target.chmod(0o644)
        target.write_bytes(b"tampered")
    elif how == "missing":
        target.unlink()
    else:
        (target.parent / "planted.py").write_text("PLANTED = True\n")


@pytest.mark.parametrize("how", ["changed", "missing", "planted"])
def test_a_damaged_vendor_directory_is_repaired_by_the_recommended_command(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    import kernels

    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"])
    assert cli("lock", cwd=project).exit_code == 0
    vendor = tmp_path / "vendor"
    assert cli("vendor", str(vendor), cwd=project).exit_code == 0
    [entry] = load_lockfile(project / "kernels.lock").kernels
    variant = entry.variant_for(str(current_target()))
    tamper(cache.vendored_variant_dir(entry, variant.name, vendor), variant.files[0].path, how)
    monkeypatch.setenv(VENDOR_ENV, str(vendor))
    kernlock.apply()
    with pytest.raises((IntegrityError, MissingFilesError)) as raised:
        kernels.get_kernel(FA2, version=2)
    fixed = cli(*recommended(str(raised.value)), cwd=project)
    assert fixed.exit_code == 0, fixed.output
    kernlock.apply()
    assert kernels.get_kernel(FA2, version=2).KERNEL_IDENTITY["commit"] == entry.commit


@pytest.mark.parametrize("pin", ["branch", "commit"])
def test_a_locked_commit_gone_from_the_hub_is_relocked(hub: TestHub, tmp_path: Path, pin: str) -> None:
    import kernels

    tip = rev_parse(hub.repo_path(FA2), "v2")
    spec = f"{FA2}@v2" if pin == "branch" else f"{FA2}@{tip}"
    project = make_project(tmp_path / "p", kernels=[spec])
    assert cli("lock", cwd=project).exit_code == 0
    rewritten = rewrite_branch(hub.repo_path(FA2), "v2")
    synced = cli("sync", cwd=project)
    assert synced.exit_code == 1
    verified = cli("verify", "--remote", cwd=project)
    assert verified.exit_code == 1 and f"locked commit {tip[:12]} is gone from the Hub" in verified.output
    assert "(the locked commit does)" not in verified.output
    kernlock.apply(project / "kernels.lock")
    with pytest.raises(MissingFilesError) as raised:
        kernels.get_kernel(FA2, revision="v2" if pin == "branch" else tip)
    message = str(raised.value)
    assert f"locked commit {tip[:12]} is gone from the Hub" in message
    assert "where the Hub is reachable" not in message
    assert recommended(synced.output) == recommended(message)
    if pin == "branch":
        assert f"fix: kernlock lock -P {FA2}" in verified.output
    if pin == "commit":  # the edit the messages ask for: a revision the Hub has
        assert "its spec pins that commit" in message and "name a revision the Hub has" in verified.output
        pyproject = project / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace(tip, rewritten))
    fixed = cli(*recommended(message), cwd=project)
    assert fixed.exit_code == 0, fixed.output
    kernlock.apply(project / "kernels.lock")
    loaded = kernels.get_kernel(FA2, revision="v2" if pin == "branch" else rewritten)
    assert loaded.KERNEL_IDENTITY["commit"] == rewritten
    assert cli("verify", "--remote", cwd=project).exit_code == 0


MODEL = "kernels-community/tiny-llama"


def test_a_model_repo_given_as_a_kernel_is_named_a_model_repo(hub: TestHub, tmp_path: Path) -> None:
    hub.models.add(MODEL)
    project = make_project(tmp_path / "p")
    before = (project / "pyproject.toml").read_bytes()
    result = cli("lock", MODEL, cwd=project)
    assert result.exit_code == 1
    assert f"{MODEL} is a model repository, not a kernel repository" in result.output
    assert ("GET", f"/api/models/{MODEL}") in hub.log
    assert (project / "pyproject.toml").read_bytes() == before
    misspelt = cli("lock", "kernels-community/flash-atn2", cwd=project)
    assert misspelt.exit_code == 1 and (f"repository not found on the Hub (from command line); did you mean {FA2}?; "
                                        f"fix: `kernlock lock {FA2}`") in misspelt.output, misspelt.output
    assert cli(*recommended(misspelt.output), cwd=project).exit_code == 0


def test_kernlock_run_with_a_python_lacking_kernlock_stops_at_the_kernel_import(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"])
    assert cli("lock", cwd=project).exit_code == 0
    other = tmp_path / "other"  # another environment: it has `kernels` (a stand-in here), not kernlock
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    python = str(other / "bin" / "python")
    packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())
    (tmp_path / "stand-in" / "kernels").mkdir(parents=True)
    (tmp_path / "stand-in" / "kernels" / "__init__.py").write_text("print('kernels ran without the lock')\n")
    (packages / "kernels.pth").write_text(str(tmp_path / "stand-in") + "\n")
    here = str(Path(kernlock.__file__).parent.parent)
    launcher = f"import sys; sys.path.insert(0, {here!r}); from kernlock._internal.cli.main import main; main()"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # kernlock is found by the launcher only

    def kernlock_run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", launcher, "run", "--", python, "-c", code], cwd=project,
                              capture_output=True, text=True, env=env, timeout=120)

    plain = kernlock_run("print('no kernels here')")
    assert plain.returncode == 0 and plain.stdout.split("\n")[0] == "no kernels here", plain.stderr
    assert plain.stderr == ""
    stopped = kernlock_run("import kernels")
    assert stopped.returncode == 1 and "ran without the lock" not in stopped.stdout
    [line] = stopped.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: ") and python in line and "cannot import kernlock" in line
    assert f"`{python} -m pip install <kernlock checkout or .whl>`" in line
    assert f"run the command with {sys.executable}" in line  # `kernlock run` names the Python it runs in
    # The fix, as the installation would do it: kernlock and its dependencies (the real kernels) in that environment.
    (packages / "kernels.pth").unlink()
    (packages / "kernlock.pth").write_text(f"{here}\n{site.getsitepackages()[0]}\n")
    fixed = kernlock_run("import kernels, kernlock._internal.runtime.apply as p; print(p.active_lock() is not None)")
    assert fixed.returncode == 0 and fixed.stdout.split() == ["True"], fixed.stderr


# ---------------------------------------------------------------- every error class: the fix it names works
# Each class whose message names a fix is provoked, the fix is run (or, where it is an edit, made) and the
# failed action then succeeds. Not here: SpecError (its message gives the grammar, no fix to run), and
# LockfileVersionError and CompatibilityError, whose fixes are pip installs that a test cannot run offline.

ACTIVATION = "kernels-community/activation"
UNTRUSTED = "untrusted-org/some-kernel"


@pytest.fixture(scope="module")
def locked_template(fixture_repos_template: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project locking FA2@v2 for this machine, locked once for this module (tests work on copies)."""
    root = tmp_path_factory.mktemp("locked")
    with pytest.MonkeyPatch.context() as patch, TestHub(fixture_repos_template) as server:
        patch.setenv("KERNLOCK_CACHE_DIR", str(root / "kernlock-cache"))
        patch_hub_client(patch, server.url, root / "hf_home")
        project = make_project(root / "p", kernels=[f"{FA2}@v2"])
        assert cli("lock", cwd=project).exit_code == 0
    return project


@pytest.fixture
def locked(hub: TestHub, locked_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the locked project, the working directory for the test, served by this test's Hub."""
    project = Path(shutil.copytree(locked_template, tmp_path / "locked"))
    monkeypatch.chdir(project)
    return project


def failing(*args: str) -> Callable[[], None]:
    """A CLI invocation that raises the `KernlockError` it reported (after checking it was one line)."""
    def attempt() -> None:
        reported: list[BaseException] = []
        report = kernlock._internal.cli.options.fail

        def spy(message: str, code: int) -> None:
            reported.append(sys.exc_info()[1])
            report(message, code)

        with mock.patch.object(kernlock._internal.cli.options, "fail", spy):
            result = cli(*args)
        if result.exit_code:
            assert reported, result.output
            assert result.output.strip().splitlines() == [f"kernlock: error: {reported[0]}"]
            raise reported[0]
    return attempt


def load() -> None:
    """Apply the lock found from the working directory and load the locked kernel."""
    import kernels

    kernlock.apply()
    assert kernels.get_kernel(FA2, version=2) is not None


def no_lock(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "kernels.lock").unlink()


def empty_vendor_dir(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "vendor").mkdir()
    monkeypatch.setenv(VENDOR_ENV, str(project / "vendor"))


def adding(spec: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    """A spoiler that declares one more spec in the project's pyproject.toml."""
    def spoil(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        pyproject = project / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace(f'"{FA2}@v2"', f'"{FA2}@v2", "{spec}"'))
    return spoil


def declaring_nothing(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project whose pyproject.toml declares no spec (the first `kernlock lock SPEC` of a new project)."""
    (project / "kernels.lock").unlink()
    make_project(project)


def hand_edited_commit(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock whose commit was mistyped by hand. (A merge conflict's fix is a git command as well:
    tests/cli/test_workspace.py runs it after a real `git merge`.)"""
    lock = project / "kernels.lock"
    lock.write_text(lock.read_text().replace('commit = "', 'commit = "zz', 1))


def tampered_cache(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("sync").exit_code == 0
    [entry] = load_lockfile(project / "kernels.lock").kernels
    variant = entry.variant_for(str(current_target()))
    tamper(cache.variant_dir(entry, variant.name), variant.files[0].path, "changed")


def as_locked(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The locked project as it is."""


COMMAND_FIXES = {
    # error class: how the project is spoiled, the user action that then fails
    "LockfileNotFoundError": (LockfileNotFoundError, no_lock, failing("sync")),
    "LockfileNotFoundError-vendor": (LockfileNotFoundError, empty_vendor_dir, load),
    "StaleLockError": (StaleLockError, adding(f"{ACTIVATION}@v1"), failing("sync", "--locked")),
    "LockfileError": (LockfileError, hand_edited_commit, failing("sync")),
    "IntegrityError": (IntegrityError, tampered_cache, load),
    "TrustError": (TrustError, adding(f"{UNTRUSTED}@v1"), failing("lock")),
    "TrustError-command-line": (TrustError, declaring_nothing, failing("lock", f"{UNTRUSTED}@v1", "--target", CUDA_X86)),
    "NoVariantError-sync": (NoVariantError, as_locked, failing("sync", "--target", CUDA_X86)),
}


@pytest.mark.parametrize("case", COMMAND_FIXES)
def test_the_command_an_error_recommends_fixes_it(case: str, locked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error, spoil, attempt = COMMAND_FIXES[case]
    spoil(locked, monkeypatch)
    with pytest.raises(error) as raised:
        attempt()
    assert type(raised.value) is error
    command = recommended(str(raised.value))
    before = project_files(locked)
    fixed = cli(*command)
    assert fixed.exit_code == 0, fixed.output
    after = project_files(locked)
    assert set(before) <= set(after), f"`kernlock {shlex.join(command)}` deleted {sorted(set(before) - set(after))}"
    changed = {path for path in after if before.get(path) != after[path]}
    unnamed = sorted(path for path in changed if not named_by(command, path))
    assert not unnamed, f"`kernlock {shlex.join(command)}` changed {unnamed}, which it does not name"
    attempt()


def project_files(root: Path) -> dict[str, bytes]:
    """Every file of the project (relative path -> bytes), kernlock's project mutex left out."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".kernlock.mutex"}


RECORDED = ("--target", "--trust", "--model")  # `kernlock lock` records these in [tool.kernlock], as it does specs


def named_by(command: list[str], path: str) -> bool:
    """Whether a printed `kernlock …` fix may change project file `path` (relative): only what its command names."""
    verb, args = command[0], [a for a in command[1:] if not a.startswith("-")]
    if verb == "lock":  # the lock; pyproject.toml only where the command adds a spec, target, trust or model
        records = any(a in command for a in RECORDED) or any(not a.startswith("-") for a in command[1:2])
        return path == "kernels.lock" or (path == "pyproject.toml" and records)
    if verb == "vendor":  # the directory it names
        folder = Path(args[0]).resolve()
        return (Path.cwd() / path).resolve().is_relative_to(folder)
    return False  # sync, verify: the shared cache only, never a project file


# Fixes that are an edit (a spec, an option, an environment variable): the edit the message describes works.


def test_an_invalid_target_is_fixed_by_the_example_it_gives(locked: Path) -> None:
    with pytest.raises(TargetError) as raised:
        failing("lock", "--target", "torch2.13-cpu")()
    example = re.search(r"e\.g\. (\S+)", str(raised.value))[1]
    failing("lock", "--target", example)()


def test_a_lockfile_outside_the_project_is_named_explicitly(locked: Path) -> None:
    with open(locked / "pyproject.toml", "a") as pyproject:
        pyproject.write('lockfile = "../elsewhere.lock"\n')
    with pytest.raises(ConfigError) as raised:
        failing("lock")()
    option = re.search(r"--lockfile (\S+)", str(raised.value))[1]
    failing("lock", "--lockfile", option)()
    failing("sync", "--lockfile", option)()


def test_an_unsafe_lock_is_used_when_named_explicitly(locked: Path) -> None:
    locked.chmod(0o777)  # another user could replace the lock
    with pytest.raises(UnsafeLockfileError) as raised:
        failing("sync")()
    assert f"--lockfile {locked / 'kernels.lock'}" in str(raised.value)
    failing("sync", "--lockfile", str(locked / "kernels.lock"))()


def test_a_missing_branch_is_fixed_by_pinning_one_the_hub_lists(locked: Path) -> None:
    with pytest.raises(ResolutionError) as raised:
        failing("lock", f"{FA2}@v9")()
    branches = re.search(r"no branch or tag 'v9' on the Hub; branches: ([\w, .-]+)", str(raised.value))[1].split(", ")
    failing("lock", f"{FA2}@{max((b for b in branches if re.fullmatch(r'v[0-9]+', b)), key=lambda b: int(b[1:]))}")()


@pytest.mark.slow
def test_a_rate_limit_is_waited_out_with_the_longer_wait_it_names(hub: TestHub, locked: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    hub.rate_limits, hub.rate_window = {"api": 1}, 1.0
    monkeypatch.setenv("KERNLOCK_RATE_LIMIT_WAIT", "0.1")
    with pytest.raises(HubError) as raised:
        failing("lock", f"{ACTIVATION}@v1")()
    variable = re.search(r"allow a longer wait with (\w+)", str(raised.value))[1]
    monkeypatch.setenv(variable, "30")
    failing("lock", f"{ACTIVATION}@v1")()
    assert hub.fired["429"] >= 2


def test_local_kernels_are_allowed_as_the_refusal_says(locked: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_KERNELS", f"{FA2}={tmp_path}")
    with pytest.raises(LocalKernelError) as raised:
        kernlock.apply()
    name, value = re.search(r"set (\w+)=(\S+) to allow", str(raised.value)).groups()
    monkeypatch.setenv(name, value)
    kernlock.apply()


def test_a_cold_cache_offline_is_filled_by_sync_where_the_hub_is_reachable(locked: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(MissingFilesError) as raised:
        load()
    assert "where the Hub is reachable" in str(raised.value)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    fixed = cli(*recommended(str(raised.value)))
    assert fixed.exit_code == 0, fixed.output
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    load()


def test_a_bad_lock_timeout_is_fixed_by_the_value_it_suggests(locked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNLOCK_MUTEX_TIMEOUT", "soon")
    with pytest.raises(UsageError) as raised:
        failing("lock")()
    name, value = re.search(r"\$(\w+)=.*set it to e\.g\. (\S+)", str(raised.value)).groups()
    monkeypatch.setenv(name, value)
    failing("lock")()


def test_a_version_without_a_build_for_a_target_is_fixed_by_the_version_lock_names(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v1"], targets=[CPU])
    with pytest.raises(NoVariantError) as raised:
        failing("lock", "--project", str(project))()
    message = str(raised.value)
    pinned = re.search(rf"pin ({re.escape(FA2)}@\S+) in its spec", message)[1]
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"{FA2}@v1", pinned))
    fixed = cli(*recommended(message), cwd=project)
    assert fixed.exit_code == 0, fixed.output
