"""Coexisting with kernels' own JSON `kernels.lock`: migration with pins kept, export beside it."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import ACTIVATION, FA2, cli, patch_hub_client
from kernlock._internal.compat.kernels_api import line
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub
from scripts.harness import ok, python, run

needs_json_lock = pytest.mark.skipif(not line().JSON_LOCK, reason="kernels 0.16's own lock is its older format")
KERNELS_CLI = [str(Path(sys.executable).with_name("kernels"))]  # kernels' own `kernels` command


@pytest.fixture(scope="module")
def kernels_locked(fixture_repos_template: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project locked with kernels' own `kernels lock` (JSON), as a kernels user has it.

    Locked once for this module against the unchanged fixture repos; tests work on copies (`kernels_project`).
    """
    root = tmp_path_factory.mktemp("kernels-locked")
    project = root / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0"\n\n'
        f'[tool.kernels.dependencies]\n"{ACTIVATION}" = 1\n"{FA2}" = 2\n'
    )
    with pytest.MonkeyPatch.context() as patch, TestHub(fixture_repos_template) as server:
        patch_hub_client(patch, server.url, root / "hf_home")
        proc = run([*KERNELS_CLI, "lock", str(project)], project)
    assert proc.returncode == 0, proc.stderr
    return project


@pytest.fixture
def kernels_project(hub: TestHub, kernels_locked: Path, tmp_path: Path) -> Callable[[str], Path]:
    """A copy of the kernels-locked project at `tmp_path / name`."""
    return lambda name: Path(shutil.copytree(kernels_locked, tmp_path / name))


@needs_json_lock
@pytest.mark.slow
def test_kernels_json_lock_is_refused_then_migrated_with_its_commits_kept(
    hub: TestHub, kernels_project: Callable[[str], Path],
) -> None:
    project = kernels_project("p")
    lockfile = project / "kernels.lock"
    original = lockfile.read_bytes()
    pins = {e["dependency"]["repo-id"]: e["lock"]["commit"] for e in json.loads(original)}
    assert set(pins) == {ACTIVATION, FA2}
    for repo, branch in ((ACTIVATION, "v1"), (FA2, "v2")):  # re-resolving now would give other commits
        assert advance_branch(hub.repo_path(repo), branch) != pins[repo]

    refused = cli("lock", cwd=project)
    assert refused.exit_code == 2
    assert "holds kernels' own JSON lock, not kernlock's" in refused.output
    assert "fix: convert it with `kernlock lock --migrate`" in refused.output
    assert lockfile.read_bytes() == original and not (project / "kernels.lock.json").exists()
    verify = cli("verify", cwd=project)
    assert verify.exit_code == 2 and "kernlock lock --migrate" in verify.output

    migrated = cli("lock", "--migrate", cwd=project)
    assert migrated.exit_code == 0, migrated.output
    lines = [line for line in migrated.output.splitlines() if "migrated kernels' JSON lock" in line]
    assert len(lines) == 1 and "(2 pins, 2 kept as locked commits)" in lines[0] and "kernels.lock.json" in lines[0]
    assert (project / "kernels.lock.json").read_bytes() == original
    lock = load_lockfile(lockfile)
    assert {k.repo: k.commit for k in lock.kernels} == pins
    assert all("kept from kernels' JSON lock" in k.resolution and k.variants for k in lock.kernels)
    assert cli("verify", cwd=project).exit_code == 0

    again = cli("lock", cwd=project)  # now kernlock's own lock: pins kept, nothing to migrate
    assert again.exit_code == 0 and "migrated" not in again.output
    assert {k.repo: k.commit for k in load_lockfile(lockfile).kernels} == pins


def test_a_kernlock_lock_replaced_by_kernels_lock_is_restored_by_the_printed_fix(hub: TestHub, tmp_path: Path) -> None:
    """`kernels lock .` writes its JSON over kernlock's committed kernels.lock: verify's fix (never `lock --upgrade`,
    which exits 2 on it) is run as printed and gives back the very lock that was committed."""
    import subprocess

    from helpers import make_project

    project = make_project(tmp_path / "p", [f"{ACTIVATION}@v1"])
    assert cli("lock", cwd=project).exit_code == 0
    lockfile = project / "kernels.lock"
    committed = lockfile.read_bytes()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "locked"], cwd=project, check=True)
    lock = load_lockfile(lockfile)
    lockfile.write_text(json.dumps([{"dependency": {"repo-id": k.repo}, "lock": {"commit": k.commit}} for k in lock.kernels]))
    verify = cli("verify", cwd=project)
    assert verify.exit_code == 2 and "kernlock lock --upgrade" not in verify.output, verify.output
    fix = verify.output.split("fix: ", 1)[1]
    restore = fix.split("`")[1]
    assert restore == f"git checkout -- {lockfile}"
    subprocess.run(restore, shell=True, cwd=project, check=True)  # the fix, as printed
    assert lockfile.read_bytes() == committed
    assert cli("verify", cwd=project).exit_code == 0


@needs_json_lock
def test_export_for_kernels_never_overwrites_kernlocks_lock(kernels_project: Callable[[str], Path]) -> None:
    import kernels

    project = kernels_project("p")
    assert cli("lock", "--migrate", cwd=project).exit_code == 0
    lockfile = project / "kernels.lock"
    before = lockfile.read_bytes()
    refused = cli("export", "--format", "kernels", "-o", "kernels.lock", cwd=project)
    assert refused.exit_code == 2 and "kernels.lock is kernlock's lock; nothing was written" in refused.output
    assert "-o kernels.lock.json" in refused.output and lockfile.read_bytes() == before

    exported = cli("export", "--format", "kernels", "-o", "kernels.lock.json", cwd=project)  # the fix it names
    assert exported.exit_code == 0, exported.output
    lock = load_lockfile(lockfile)
    for kernel in lock.kernels:  # kernels itself reads the export
        module = kernels.get_locked_kernel(kernel.repo, lockfile=project / "kernels.lock.json")
        assert module.KERNEL_IDENTITY["commit"] == kernel.commit


PACKAGE_CODE = """from kernels import load_kernel


def activation():
    return load_kernel("kernels-community/activation", lockfile=None)  # the lock from this package's metadata
"""
CALL_PACKAGE = """
import kernlock
if APPLY:
    kernlock.apply()
import lockedpkg
try:
    tiny.result(identity=lockedpkg.activation().KERNEL_IDENTITY)
except Exception as error:
    tiny.result(error=[type(error).__name__, str(error)])
"""


def _installed_package(project: Path, site: Path) -> Path:
    """Build a wheel of `project` with setuptools (kernels' egg_info hook active) and install it into `site`."""
    (project / "lockedpkg").mkdir()
    (project / "lockedpkg" / "__init__.py").write_text(PACKAGE_CODE)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        + pyproject.read_text().replace('name = "demo"', 'name = "lockedpkg"')
        + '\n[tool.setuptools]\npackages = ["lockedpkg"]\n'
    )
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    built = run([*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", "dist", "."], project)
    assert built.returncode == 0, built.stderr
    [wheel] = (project / "dist").glob("*.whl")
    installed = run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], project)
    assert installed.returncode == 0, installed.stderr
    [metadata] = site.glob("lockedpkg-*.dist-info")
    return metadata


@needs_json_lock
@pytest.mark.slow
def test_packaged_load_kernel_works_under_apply_and_fails_no_worse_without(
    hub: TestHub, kernels_project: Callable[[str], Path], tmp_path: Path,
) -> None:
    ours = kernels_project("ours")  # kernels' JSON lock, then migrated: the wheel carries kernlock's TOML
    theirs = kernels_project("theirs")  # the same project with kernels' JSON lock: the "before"
    assert cli("lock", "--migrate", cwd=ours).exit_code == 0
    commit = load_lockfile(ours / "kernels.lock").kernel(f"{ACTIVATION}@v1").commit
    advance_branch(hub.repo_path(ACTIVATION), "v1")

    ours_metadata = _installed_package(ours, tmp_path / "site-ours")
    assert (ours_metadata / "kernels.lock").read_bytes() == (ours / "kernels.lock").read_bytes()  # kernels' hook copied it
    _installed_package(theirs, tmp_path / "site-theirs")

    def call(site: str, apply: bool, **env: str) -> dict:
        code = f"sys.path.insert(0, {str(tmp_path / site)!r})\nAPPLY = {apply}\n{CALL_PACKAGE}"
        return ok(python(code, tmp_path, **env))

    locked = call("site-ours", True, KERNLOCK_LOCKFILE=str(ours / "kernels.lock"))
    assert locked["identity"]["commit"] == commit
    before, without = call("site-theirs", False), call("site-ours", False)
    assert before["error"][0] == "ValueError" and without["error"] == before["error"], (before, without)
