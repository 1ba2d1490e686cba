"""Attack classes of issue 28 (round 2), items 10, 17 and 18: each test reproduces one and checks that it is fixed."""

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
from kernlock._internal.store.lockfile_io import load_lockfile
from kernlock._internal.store.mutex import PROJECT_LOCK_NAME
from kernlock.testing.hub import TestHub

ACTIVATION = "kernels-community/activation@v1"
TAGGED = "kernels-community/tagged@v1"


# ---------------------------------------------------------------- item 10: concurrent writers


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
    assert not (project / PROJECT_LOCK_NAME).exists()  # the project's lock file is removed on release


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
    assert not (out / kernlock._internal.fetch.vendor.VENDOR_LOCK_NAME).exists()
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
        assert not (project / PROJECT_LOCK_NAME).exists()
    finally:
        project.chmod(0o755)


# ---------------------------------------------------------------- item 17: messages


@pytest.fixture
def fresh_private(private_kernlock_cache: Path):
    """The private cache directory, with no directory opened by this process yet."""
    from kernlock._internal.store import private

    def forget() -> None:
        for fd, _ in private._opened.values():
            os.close(fd)
        private._opened.clear()
        getattr(private, "_said", set()).clear()

    forget()
    yield private
    forget()


def test_an_empty_key_file_left_by_a_crash_is_repaired(fresh_private, private_kernlock_cache: Path) -> None:
    private_kernlock_cache.mkdir(mode=0o700)
    key = private_kernlock_cache / "key"
    key.touch(mode=0o600)  # a crash between creating the key file and writing it
    assert fresh_private.write_entry("probe", b"payload")  # was: False, for good (the cache silently off)
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
    fresh_private._opened.clear()
    assert fresh_private.read_entry("probe") == b"payload"
    assert not [p.name for p in private_kernlock_cache.iterdir() if p.name.endswith(".tmp")]


def test_an_unusable_key_file_is_said_once(fresh_private, private_kernlock_cache: Path, capsys) -> None:
    private_kernlock_cache.mkdir(mode=0o700)
    key = private_kernlock_cache / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o644)  # readable by other users: it vouches for nothing, and kernlock must not rewrite it
    for _ in range(3):
        assert not fresh_private.write_entry("probe", b"payload")
        assert fresh_private.read_entry("probe") is None
    err = capsys.readouterr().err
    assert err.count("kernlock: warning:") == 1, err
    assert f"the private cache {private_kernlock_cache} is off: its key file is readable by other users" in err
    assert f"remove {key}" in err
    key.unlink()  # the fix the warning names
    assert fresh_private.write_entry("probe", b"payload")


# ---------------------------------------------------------------- item 19 and the README threat model


def test_the_threat_model_states_what_is_not_covered() -> None:
    model = (Path(__file__).resolve().parent.parent / "docs" / "explanation" / "threat-model.md").read_text()
    covered, not_covered = model.split("What it does not protect against:", 1)
    assert 'PathFinder.find_spec("kernels")' in not_covered and "exec_module" in not_covered  # item 19: out of scope
    assert "a window of microseconds" not in model  # sources are hashed as they are read (tests/test_round2.py)
    assert "hashed against the lock as they are read" in covered
    for launch in ("`subprocess`", "`os.exec*`", "`os.posix_spawn*`", "`python -E`, `-I`, `-S`"):
        assert launch in covered, launch


# ---------------------------------------------------------------- item 18: kernel-depends cycles


def _depend(hub: TestHub, repo: str, on: str) -> str:
    """Push a rebuild of `repo`'s v1 whose every variant's metadata.json lists `on` (version 1) in kernel-depends."""
    import json

    from kernlock.testing.fixtures import git, push_build

    path = hub.repo_path(repo)
    listed = git(path, "ls-tree", "-r", "--name-only", "refs/heads/v1").decode().split()
    files = {}
    for name in [p for p in listed if p.startswith("build/") and p.endswith("/metadata.json")]:
        metadata = json.loads(git(path, "cat-file", "blob", f"refs/heads/v1:{name}"))
        metadata["kernel-depends"] = [{"repo-id": on, "version": 1}]
        files[name] = (json.dumps(metadata, indent=2) + "\n").encode()
    return push_build(path, "v1", files, f"depend on {on}")


@pytest.mark.parametrize("shape", ["itself", "two-kernel cycle"])
def test_a_kernel_that_depends_on_itself_is_refused_at_lock_time(hub: TestHub, tmp_path: Path, shape: str) -> None:
    from helpers import ACTIVATION as DEP
    from helpers import WITH_DEP

    if shape == "itself":
        commit, cycle = _depend(hub, WITH_DEP, WITH_DEP), f"{WITH_DEP} -> {WITH_DEP}"
    else:  # with-dep v1 lists activation v1; activation v1 now lists with-dep v1
        commit, cycle = _depend(hub, DEP, WITH_DEP), f"{DEP} -> {WITH_DEP} -> {DEP}"
    first = cycle.split(" -> ")[0]
    project = make_project(tmp_path / "p", kernels=[f"{WITH_DEP}@v1"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernlock: error: "), result.output
    assert f"kernel-depends form a cycle: {cycle} (in metadata.json at {first}@{commit[:12]})" in lines[0], lines[0]
    assert f"fix: pin a revision without the cycle (`kernlock lock {first}@<commit>`)" in lines[0]
    assert not (project / "kernels.lock").exists()


# ---------------------------------------------------------------- item 17: messages (migration, duplicate tree entries)


def test_migrating_a_bogus_commit_names_the_lock_not_the_hub(hub: TestHub, tmp_path: Path) -> None:
    import json

    from helpers import ACTIVATION as REPO

    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'[project]\nname = "demo"\nversion = "0"\n\n[tool.kernels.dependencies]\n"{REPO}" = 1\n'
                                            f'\n[tool.kernlock]\ntargets = ["{CPU}"]\n')
    bogus = "0123456789abcdef0123456789abcdef01234567"  # well formed, on no branch of the repo
    (project / "kernels.lock").write_text(json.dumps([{"dependency": {"repo-id": REPO, "version": 1},
                                                       "lock": {"commit": bogus}}]))
    result = cli("lock", "--migrate", cwd=project)
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert "looks broken" not in lines[0] and "try again later" not in lines[0]
    assert f"kernels' JSON lock pins {REPO} to commit {bogus[:12]}, which the Hub does not have" in lines[0], lines[0]
    assert "fix: correct or remove that pin in the JSON lock, then run `kernlock lock --migrate` again" in lines[0]
    assert json.loads((project / "kernels.lock").read_text())[0]["lock"]["commit"] == bogus  # nothing was written


def test_duplicate_tree_entries_blame_the_hub_listing_not_a_hand_edit(hub: TestHub, tmp_path: Path) -> None:
    from helpers import ACTIVATION as REPO

    import json
    import urllib.request

    with urllib.request.urlopen(f"{hub.url}/api/kernels/{REPO}/tree/v1/build?recursive=true", timeout=30) as answer:
        listing = json.loads(answer.read())
    entry = next(e for e in listing if e.get("type") == "file" and "cpu" in e["path"])
    project = make_project(tmp_path / "p", kernels=[f"{REPO}@v1"], targets=[CPU])
    hub.add_fault("respond", match="/tree/", times=5, body=[*listing, dict(entry)])  # one real entry listed twice
    result = cli("lock", cwd=project)
    assert result.exit_code == 1, result.output
    assert "undo the hand edit" not in result.output  # was: the lock model's fix for a hand-edited lock
    assert f"the Hub listed {entry['path']!r}" in result.output and "more than once" in result.output, result.output
    assert not (project / "kernels.lock").exists()


def test_a_lock_file_left_by_a_killed_lock_is_taken_over_and_removed(hub: TestHub, tmp_path: Path) -> None:
    """`kernlock lock` killed while it holds the project's lock leaves `.kernlock.lock`; the next run takes it
    over (the kernel dropped the dead holder's lock) and removes it, as the README says."""
    project = make_project(tmp_path / "p", targets=[CPU])
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from kernlock._internal.store.mutex import ProjectLock\n"
         "with ProjectLock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)", str(project)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "KERNLOCK_STATE_DIR": str(tmp_path / "state")})
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait()
    assert (project / PROJECT_LOCK_NAME).exists()  # the leftover
    done = run_kernlock("lock", ACTIVATION, cwd=project, env={"KERNLOCK_LOCK_TIMEOUT": "5"})
    assert done.returncode == 0, done.stderr
    assert [k.spec for k in load_lockfile(project / "kernels.lock").kernels] == [ACTIVATION]
    assert not (project / PROJECT_LOCK_NAME).exists()
