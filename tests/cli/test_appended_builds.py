"""Append, don't move (issue 37): a target added to a lock whose commit has no build for it takes the build
appended to the locked branch since, and the bytes of every target locked before stay the same."""

from __future__ import annotations

import hashlib
from pathlib import Path

from helpers import CPU, CUDA_X86, cli, lock_project
from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import git, move_branch, rev_parse
from kernlock.testing.hub import TestHub

APPENDED = "kernels-community/appended"
TORCH214 = "torch2.14-cxx11-cpu-x86_64-linux"
OLD_TARGETS = (CPU, CUDA_X86)


def _lock_before_append(hub: TestHub, root: Path, branch: str, back: int = 1) -> tuple[Path, Lockfile, str]:
    """Lock `APPENDED@branch` as it was `back` commits ago, then let the branch move on to its tip again."""
    repo = hub.repo_path(APPENDED)
    tip = rev_parse(repo, branch)
    move_branch(repo, branch, rev_parse(repo, f"{branch}~{back}"))
    project, lock = lock_project(root, [f"{APPENDED}@{branch}"], OLD_TARGETS)
    move_branch(repo, branch, tip)
    return project, lock, tip


def _bytes_sha256(hub: TestHub, lock: Lockfile, spec: str, target: str) -> dict[str, str]:
    """sha256 of each file the lock binds on `target`, hashed from the bytes at the commit it names (git, not the lock)."""
    kernel = lock.kernel(spec, target)
    assert kernel is not None
    variant = kernel.variant_for(target)
    assert variant is not None
    return {f.path: hashlib.sha256(git(hub.repo_path(APPENDED), "cat-file", "blob",
                                       f"{kernel.commit}:build/{variant.name}/{f.path}")).hexdigest()
            for f in variant.files}


def _locked_sha256(lock: Lockfile, spec: str, target: str) -> dict[str, str]:
    kernel = lock.kernel(spec, target)
    assert kernel is not None and (variant := kernel.variant_for(target)) is not None
    return {f.path: f.sha256 for f in variant.files}


def test_identical_older_variants_move_the_entry(hub: TestHub, tmp_path: Path) -> None:
    spec = f"{APPENDED}@v1"
    project, before, tip = _lock_before_append(hub, tmp_path / "p", "v1")
    old = before.kernel(spec)
    assert old is not None and old.commit != tip

    result = cli("lock", "--target", TORCH214, cwd=project)

    assert result.exit_code == 0, result.output
    after = load_lockfile(project / "kernels.lock")
    [entry] = after.entries(spec)
    assert entry.commit == tip and entry.override is None
    assert entry.variant_for(TORCH214) is not None
    assert f"{spec}  {old.commit[:12]} -> {tip[:12]}  (moved to {tip[:12]}: builds appended, locked variants unchanged)" \
        in result.output
    for target in OLD_TARGETS:  # what ran before is byte for byte what runs now
        assert _locked_sha256(after, spec, target) == _locked_sha256(before, spec, target)
        assert _bytes_sha256(hub, after, spec, target) == _locked_sha256(before, spec, target)
    assert "moved to" in entry.resolution
    assert cli("verify", cwd=project).exit_code == 0
    assert cli("lock", "--check", cwd=project).exit_code == 0


def test_rebuilt_older_variants_pin_the_new_target_alone(hub: TestHub, tmp_path: Path) -> None:
    spec = f"{APPENDED}@v2"
    project, before, tip = _lock_before_append(hub, tmp_path / "p", "v2")
    old = before.kernel(spec)
    assert old is not None
    text = (project / "pyproject.toml").read_text()  # a new `[tool.kernlock] targets` entry this time
    (project / "pyproject.toml").write_text(text.replace(f'"{CUDA_X86}"]', f'"{CUDA_X86}", "{TORCH214}"]'))

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    after = load_lockfile(project / "kernels.lock")
    main, = [k for k in after.entries(spec) if k.override is None]
    pinned = after.kernel(spec, TORCH214)
    assert main.commit == old.commit and main.variant_for(TORCH214) is None
    assert pinned is not None and pinned.commit == tip
    assert pinned.override is not None and pinned.override.when == f"target={TORCH214}"
    assert pinned.override.reason == f"build appended at {tip[:12]}"
    assert f"{spec} [target={TORCH214}]  - -> {tip[:12]}  (build appended at {tip[:12]})" in result.output
    for target in OLD_TARGETS:
        assert after.kernel(spec, target) is not None and after.kernel(spec, target).commit == old.commit
        assert _bytes_sha256(hub, after, spec, target) == _locked_sha256(before, spec, target)
    # the rebuild really changed the older bytes at the tip: moving would have changed what ran before
    rebuilt = hashlib.sha256(git(hub.repo_path(APPENDED), "cat-file", "blob",
                                 f"{tip}:build/torch213-cxx11-cpu-x86_64-linux/appended/_ops.so")).hexdigest()
    assert rebuilt != _locked_sha256(before, spec, CPU)["appended/_ops.so"]
    # the pin is the lock's own, not a stale [tool.kernlock.overrides] entry; a re-lock keeps it byte for byte
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0
    lock_text = (project / "kernels.lock").read_text()
    again = cli("lock", cwd=project)
    assert again.exit_code == 0 and (project / "kernels.lock").read_text() == lock_text
    explained = cli("explain", APPENDED, cwd=project)
    assert f"{main.commit[:12]} has no build for {TORCH214}; build appended at {tip[:12]}" in explained.output
    # -P takes the tip for every target again: one entry
    upgraded = cli("lock", "-P", APPENDED, cwd=project)
    assert upgraded.exit_code == 0, upgraded.output
    assert [k.commit for k in load_lockfile(project / "kernels.lock").entries(spec)] == [tip]


def test_newest_commit_keeping_the_locked_bytes_wins(hub: TestHub, tmp_path: Path) -> None:
    """v3: #2 appended torch 2.14 builds, #3 rebuilt everything: the entry moves to #2, not to the tip."""
    spec = f"{APPENDED}@v3"
    project, before, tip = _lock_before_append(hub, tmp_path / "p", "v3", back=2)
    appended = rev_parse(hub.repo_path(APPENDED), "v3~1")

    result = cli("lock", "--target", TORCH214, cwd=project)

    assert result.exit_code == 0, result.output
    [entry] = load_lockfile(project / "kernels.lock").entries(spec)
    assert entry.commit == appended != tip
    assert f"moved to {appended[:12]}: builds appended, locked variants unchanged" in result.output


def test_outdated_reports_builds_appended_for_targets_not_locked(hub: TestHub, tmp_path: Path) -> None:
    project, _, tip = _lock_before_append(hub, tmp_path / "p", "v1")

    result = cli("outdated", cwd=project)

    assert result.exit_code == 0, result.output
    assert ("builds appended to v1 for targets the lock does not have: torch214-cxx11-cpu-x86_64-linux, "
            f"torch214-cxx11-cu130-x86_64-linux (add one: kernlock lock --target {TORCH214})") in result.output
    import json

    [status] = json.loads(cli("outdated", "--json", cwd=project).output)
    assert status["current"] == tip
    assert status["appended"] == ["torch214-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"]
