"""Re-locking like `uv lock`: what changed and why, `--check`, `--dry-run`, `-q`, and no churn without a pin change."""

from __future__ import annotations

import json

from helpers import (
    ACTIVATION,
    CPU,
    CU128_ON_V2,
    CUDA_X86,
    FA2,
    TAGGED,
    UNIVERSAL,
    LockedProjectFactory,
    cli,
    make_project,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub


def test_json_reports_an_override_entry_whose_commit_moved(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([FA2], [CPU, CUDA_X86], extra=CU128_ON_V2)
    old = lock.kernel(FA2, CUDA_X86).commit
    moved = advance_branch(hub.repo_path(FA2), "v2")
    result = cli("lock", "-P", FA2, "--json", cwd=project)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert load_lockfile(project / "kernels.lock").kernel(FA2, CUDA_X86).commit == moved
    assert data["updated"] == [FA2]
    assert data["changes"] == [
        {"spec": FA2, "override": "backend=cu128", "old": old, "new": moved, "reason": "branch moved"},
    ]


def test_a_relock_prints_each_changed_entry_with_why(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    act, gone, new_spec = f"{ACTIVATION}@v1", f"{TAGGED}@v1", f"{UNIVERSAL}@v1"
    project, lock = locked_project([FA2, act, gone], [CPU, CUDA_X86])
    old_act, old_fa2, old_gone = (lock.kernel(s).commit for s in (act, FA2, gone))
    moved = advance_branch(hub.repo_path(ACTIVATION), "v1")
    make_project(project, kernels=[FA2, act, new_spec], targets=[CPU, CUDA_X86], extra=CU128_ON_V2)
    result = cli("lock", "-P", ACTIVATION, cwd=project)
    assert result.exit_code == 0, result.output
    new = load_lockfile(project / "kernels.lock")
    pinned, added = new.kernel(FA2, CUDA_X86).commit, new.kernel(new_spec).commit
    changes = [line for line in result.output.splitlines() if " -> " in line]
    assert changes == [
        f"  {act}  {old_act[:12]} -> {moved[:12]}  (branch moved)",
        f"  {FA2} [backend=cu128]  - -> {pinned[:12]}  (override)",
        f"  {gone}  {old_gone[:12]} -> -  (removed)",
        f"  {new_spec}  - -> {added[:12]}  (added)",
    ]
    assert new.kernel(FA2, CPU).commit == old_fa2  # the spec's own entry is kept: no line for it
    assert result.output.splitlines()[-1].endswith("2 added, 1 updated, 1 removed)")


def test_check_fails_when_a_relock_would_change_the_lock_and_writes_nothing(
        hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{TAGGED}@dev"], [CPU])
    before, sources = (project / "kernels.lock").read_bytes(), (project / "pyproject.toml").read_bytes()
    assert cli("lock", "--check", cwd=project).exit_code == 0
    moved = advance_branch(hub.repo_path(TAGGED), "dev")
    assert cli("lock", "--check", cwd=project).exit_code == 0  # a kept pin is no change
    stale = cli("lock", "--check", "-P", TAGGED, cwd=project)
    assert stale.exit_code == 1
    [line] = stale.output.strip().splitlines()
    assert line == (f"kernlock: error: {project / 'kernels.lock'} is out of date: {TAGGED}@dev "
                    f"{lock.kernels[0].commit[:12]} -> {moved[:12]} (branch moved); fix: run `kernlock lock -P {TAGGED}`")
    added = cli("lock", "--check", f"{ACTIVATION}@v1", cwd=project)
    assert added.exit_code == 1 and "(added); fix: run `kernlock lock kernels-community/activation@v1`" in added.output
    assert (project / "kernels.lock").read_bytes() == before and (project / "pyproject.toml").read_bytes() == sources
    fixed = cli("lock", "-P", TAGGED, cwd=project)  # the fix it names
    assert fixed.exit_code == 0, fixed.output
    assert cli("lock", "--check", "-P", TAGGED, cwd=project).exit_code == 0


def test_dry_run_prints_the_changes_and_writes_nothing(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{TAGGED}@dev"], [CPU])
    before, sources = (project / "kernels.lock").read_bytes(), (project / "pyproject.toml").read_bytes()
    moved = advance_branch(hub.repo_path(TAGGED), "dev")
    result = cli("lock", "--dry-run", "-U", f"{ACTIVATION}@v1", cwd=project)
    assert result.exit_code == 0, result.output
    assert f"  {TAGGED}@dev  {lock.kernels[0].commit[:12]} -> {moved[:12]}  (branch moved)" in result.output
    assert result.output.splitlines()[-1].startswith(f"would write {project / 'kernels.lock'} (2 kernels, 1 target, ")
    assert (project / "kernels.lock").read_bytes() == before and (project / "pyproject.toml").read_bytes() == sources


def test_quiet_prints_nothing_on_success(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{TAGGED}@dev"], [CPU])
    result = cli("lock", "-q", f"{ACTIVATION}@v1", cwd=project)
    assert result.exit_code == 0 and result.output == ""
    assert load_lockfile(project / "kernels.lock").kernel(f"{ACTIVATION}@v1") is not None


def test_a_relock_without_a_pin_change_keeps_the_locks_bytes(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([FA2, f"{TAGGED}@v1"], [CPU])
    installed = lock.resolved_with["transformers"]
    path = project / "kernels.lock"
    teammates = path.read_text().replace(f'transformers = "{installed}"', 'transformers = "5.19.0"')
    assert teammates != path.read_text()
    path.write_text(teammates)  # locked by a teammate with another Transformers release
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert path.read_text() == teammates
    assert result.output.splitlines()[-1].startswith(f"unchanged: {path}")
