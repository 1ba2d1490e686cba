"""Per-target overrides end to end: locked, shown, explained, applied on the matching machine, stale when changed.

Parsing and matching rules are unit tests (tests/unit/model/test_override_rules.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import (
    CPU,
    CU128_ON_V2,
    CUDA_130,
    CUDA_X86,
    FA2,
    LockedProjectFactory,
    cli,
    make_project,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.store.hub_cache import variant_dir, vendored_variant_dir
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub
from scripts.harness import load_identities


@pytest.mark.slow
def test_override_sends_cu128_targets_to_v2_and_others_keep_the_default(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU, CUDA_X86, CUDA_130], extra=CU128_ON_V2)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    repo = hub.repo_path(FA2)
    assert lock.kernel(FA2, CUDA_X86).commit == rev_parse(repo, "v2")
    assert lock.kernel(FA2, CUDA_X86).override.reason.startswith("v3+ fails")
    assert lock.kernel(FA2, CPU).commit == lock.kernel(FA2, CUDA_130).commit == rev_parse(repo, "v4")
    assert lock.kernel(FA2, CPU).override is None
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0
    shown = cli("show", cwd=project).output
    assert "override backend=cu128: v3+ fails in the GQA backward pass" in shown
    explained = cli("explain", FA2, cwd=project).output
    assert "override for backend=cu128 → v2: v3+ fails" in explained

    # apply() on a simulated cu128 machine loads the v2 commit; on this CPU machine, v4.
    cu128 = load_identities(project, [FA2], {"KERNLOCK_TARGET": CUDA_X86}, version=4)[0]
    assert (cu128["commit"], cu128["variant"]) == (rev_parse(repo, "v2"), "torch212-cxx11-cu128-x86_64-linux")
    here = load_identities(project, [FA2], version=4)[0]
    assert (here["commit"], here["variant"]) == (rev_parse(repo, "v4"), "torch213-cxx11-cpu-x86_64-linux")

    # Changing the override makes the lock stale until it is re-locked.
    make_project(project, kernels=[FA2], targets=[CPU, CUDA_X86, CUDA_130], extra=CU128_ON_V2.replace('"v2"', '"v3"'))
    stale = cli("verify", "--all-targets", cwd=project)
    assert stale.exit_code == 1 and "override for kernels-community/flash-attn2 (backend=cu128 → v3) is not in the lock" in stale.output
    assert cli("lock", cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernel(FA2, CUDA_X86).commit == rev_parse(repo, "v3")


def test_a_bad_override_is_a_one_line_usage_error(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU],
                           extra=f'\n[tool.kernlock.overrides."{FA2}"]\nbackend = "cu128"\nversion = 2\n')
    result = cli("lock", cwd=project)
    assert result.exit_code == 2 and not (project / "kernels.lock").exists()
    assert result.output.strip().splitlines() == [
        f'kernlock: error: {project / "pyproject.toml"}: [tool.kernlock.overrides."{FA2}"][0]: '
        "the override has no reason; fix: give a reason (it is shown by kernlock show and explain)"
    ]


def test_sync_repair_and_vendor_take_the_entry_covering_each_target(locked_project: LockedProjectFactory,
                                                                     tmp_path: Path) -> None:
    project, lock = locked_project([FA2], [CPU, CUDA_X86], extra=CU128_ON_V2)
    pinned, default = lock.kernel(FA2, CUDA_X86), lock.kernel(FA2, CPU)
    assert pinned.commit != default.commit
    here = cli("sync", cwd=project)
    assert here.exit_code == 0, here.output
    everywhere = cli("sync", "--all-targets", cwd=project)
    assert everywhere.exit_code == 0, everywhere.output
    for kernel, target in ((pinned, CUDA_X86), (default, CPU)):
        variant = kernel.variant_for(target)
        assert all((variant_dir(kernel, variant.name) / f.path).is_file() for f in variant.files)

    damaged = (variant_dir(pinned, pinned.variant_for(CUDA_X86).name) / "metadata.json").resolve()
    damaged.write_bytes(damaged.read_bytes().replace(b"{", b"[", 1))
    assert cli("sync", "--all-targets", cwd=project).exit_code == 1
    repaired = cli("sync", "--all-targets", "--repair", cwd=project)
    assert repaired.exit_code == 0, repaired.output
    assert "1 repaired" in repaired.output

    vendor = tmp_path / "vendor"
    vendored = cli("vendor", str(vendor), cwd=project)
    assert vendored.exit_code == 0, vendored.output
    for kernel, target in ((pinned, CUDA_X86), (default, CPU)):
        variant = kernel.variant_for(target)
        assert all((vendored_variant_dir(kernel, variant.name, vendor) / f.path).is_file() for f in variant.files)


def test_an_override_keyed_by_a_spec_is_a_one_line_config_error(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([FA2], [CPU])
    make_project(project, kernels=[FA2], targets=[CPU],
                 extra=f'\n[tool.kernlock.overrides."{FA2}@v2"]\nbackend = "cu128"\nrevision = "v1"\nreason = "r"\n')
    for command in (["show"], ["lock"], ["verify"]):
        result = cli(*command, cwd=project)
        assert result.exit_code == 2, result.output
        assert result.output.strip().splitlines() == [
            f'kernlock: error: {project / "pyproject.toml"}: [tool.kernlock.overrides."{FA2}@v2"]: '
            f'the key must be a repo (org/repo), not a spec; fix: key it [tool.kernlock.overrides."{FA2}"] '
            "(the override's version or revision is its pin)"
        ]


def test_explain_a_target_shows_the_entry_covering_it(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([FA2], [CPU, CUDA_X86], extra=CU128_ON_V2)
    text = cli("explain", FA2, "--target", CUDA_X86, cwd=project)
    assert text.exit_code == 0, text.output
    assert "not locked" not in text.output
    assert f"target {CUDA_X86}: kernels picks torch212-cxx11-cu128-x86_64-linux; the lock has torch212-cxx11-cu128" in text.output
    report = json.loads(cli("explain", FA2, "--target", CUDA_X86, "--target", CPU, "--json", cwd=project).output)
    rows = {(entry["commit"], row["target"], row["locked"]) for entry in report for row in entry["targets"]}
    assert rows == {(lock.kernel(FA2, t).commit, t, lock.kernel(FA2, t).variant_for(t).name) for t in (CPU, CUDA_X86)}


def test_remove_drops_the_overrides_of_the_repo_and_leaves_no_empty_kernels(hub: TestHub, tmp_path: Path) -> None:
    """`kernlock remove` of the last spec of a repo drops its overrides too, and no `kernels = []` stays behind
    (issue 27, item 14)."""
    import tomllib

    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU, CUDA_X86], extra=CU128_ON_V2)
    assert cli("lock", cwd=project).exit_code == 0
    removed = cli("remove", FA2, cwd=project)
    assert removed.exit_code == 0, removed.output
    text = (project / "pyproject.toml").read_text()
    config = tomllib.loads(text)["tool"]["kernlock"]
    assert "overrides" not in config and "kernels" not in config, text
    assert "kernels = []" not in text and "v3+ fails" not in text
    assert load_lockfile(project / "kernels.lock").kernels == ()
    assert cli("show", cwd=project).exit_code == 0
