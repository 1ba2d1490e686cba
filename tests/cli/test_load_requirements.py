"""`verify` checks each target's locked variants as kernels would validate them at load (`MinverValidator`,
`DependencyValidator` for the target's backend) and names the `pip install` that fixes it; `lock` warns about a
build from a dirty tree (kernels' `DirtyValidator`)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import CPU, CUDA_X86, PROVENANCE, cli, make_project
from kernlock._internal.host import installed_version
from kernlock.testing.hub import TestHub

CUTLASS = "kernels-community/cutlass-dep"


def _doctor(project: Path, *args: str) -> dict:
    result = cli("verify", "--json", *args, cwd=project)
    doctor = next(check for check in json.loads(result.output)["checks"] if check["name"] == "doctor")
    return doctor | {"exit": result.exit_code}


def test_a_declared_cuda_targets_python_depends_is_checked_with_its_backends_mapping(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{CUTLASS}@v1"], targets=[CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    doctor = _doctor(project, "--all-targets")  # this CPU machine has no variant locked: only the declared target's
    assert doctor["exit"] != 0 and not doctor["ok"]
    [problem] = doctor["problems"]
    assert problem["message"] == (f"{CUTLASS}@v1 torch212-cxx11-cu128-x86_64-linux needs Python package "
                                  "nvidia-cutlass-dsl (import cutlass), which is not installed")
    assert problem["fix"] == "pip install nvidia-cutlass-dsl"
    assert doctor["summary"] == "1 variant for 2 targets"


def test_a_declared_targets_kernels_minver_is_checked(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{PROVENANCE}@v2"], targets=[CUDA_X86])
    assert cli("lock", cwd=project).exit_code == 0
    doctor = _doctor(project, "--target", CUDA_X86)
    messages = [p["message"] for p in doctor["problems"]]
    assert doctor["exit"] != 0
    assert (f"{PROVENANCE}@v2 torch212-cxx11-cu128-x86_64-linux needs kernels>=0.99.0, installed kernels "
            f"{installed_version('kernels')}") in " ".join(messages)
    assert any("needs Python package einops (import einops), which is not installed" in m for m in messages)
    assert "pip install einops" in [p["fix"] for p in doctor["problems"]]
    # The same build for this machine too: each finding once, not once per target.
    make_project(project, kernels=[f"{PROVENANCE}@v2"], targets=[CUDA_X86, CPU])
    assert cli("lock", cwd=project).exit_code == 0
    both = _doctor(project, "--all-targets")
    assert len([p for p in both["problems"] if "einops" in p["message"]]) == 2  # two variants, one finding each
    assert len({(p["message"], p["fix"]) for p in both["problems"]}) == len(both["problems"])


def test_lock_warns_about_a_build_from_a_dirty_tree(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{PROVENANCE}@v2"], targets=[CPU])
    dirty = cli("lock", cwd=project)
    assert dirty.exit_code == 0
    assert (f"warning: {PROVENANCE}@v2 torch213-cxx11-cpu-x86_64-linux was built from a dirty git tree (kernel source "
            "had uncommitted changes): its recorded revision does not fully identify its sources "
            "(`kernlock show --provenance`)") in dirty.output
    make_project(project, kernels=[f"{PROVENANCE}@v1"], targets=[CPU])
    clean = cli("lock", cwd=project)
    assert clean.exit_code == 0 and "dirty" not in clean.output
