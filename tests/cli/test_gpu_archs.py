"""GPU architectures as part of coverage (issue 34): the lock records each CUDA/ROCm build's `backend.archs`;
`verify` fails, offline, when a build does not support an architecture the project declares for a target
(`[tool.kernlock] gpu-archs`); under `apply()` a build that does not support this GPU is refused with one line
before it loads. kernels' own `archs` module decides every match (checked here against `ArchValidator`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import kernels
import pytest

import kernlock
from helpers import CPU, LockedProjectFactory, cli, kernels_module, make_project
from kernlock._internal.compat.kernels_api import arch_covers
from kernlock.errors import GpuArchError
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub

SM100 = "kernels-community/sm100-only"
HOPPER = "kernels-community/hopper-only"
CU130 = "torch2.13-cxx11-cu130-x86_64-linux"
CU130_VARIANT = "torch213-cxx11-cu130-x86_64-linux"


pytestmark = pytest.mark.usefixtures("release_and_unload_kernels")


def _gpu_archs(project: Path, *args: str) -> dict:
    result = cli("verify", "--json", *args, cwd=project)
    report = json.loads(result.output)
    check = next((c for c in report["checks"] if c["name"] == "gpu-archs"), None)
    return {"exit": result.exit_code, "check": check, "checks": [c["name"] for c in report["checks"]]}


def test_the_lock_records_each_gpu_builds_archs_as_its_metadata_lists_them(locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{SM100}@v1", f"{SM100}@v2"], targets=[CU130, CPU])
    v1, v2 = lock.kernel(f"{SM100}@v1"), lock.kernel(f"{SM100}@v2")
    assert v1 is not None and v2 is not None
    assert v1.variant_for(CU130).archs == ("10.0",)
    assert v2.variant_for(CU130).archs == ("8.0", "9.0a", "10.0f+PTX")  # kernel-builder's order and suffixes
    assert v1.variant_for(CPU).archs == v2.variant_for(CPU).archs == ()  # a CPU build lists none
    text = (project / "kernels.lock").read_text()
    assert 'version = "1.3"' in text and 'archs = ["10.0"]' in text


def test_verify_fails_offline_for_a_declared_a100_pool_against_a_10_0_only_build(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SM100}@v1"], targets=[CU130, CPU], extra='gpu-archs = ["8.0"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    found = _gpu_archs(project)  # this CPU machine's own target is checked, and every locked GPU target too
    assert found["exit"] != 0 and not found["check"]["ok"]
    [problem] = found["check"]["problems"]
    assert problem["message"] == (
        f"{SM100}@v1 {CU130_VARIANT} at {rev_parse(hub.repo_path(SM100), 'v1')[:12]} is built for GPU archs 10.0, which do not cover "
        f"declared GPU arch 8.0 of target {CU130}; kernels would refuse to load it there")
    assert problem["fix"] == (f"lock a build of {SM100} that supports 8.0 (`kernlock explain {SM100}`, then "
                              f"`kernlock lock {SM100}@<revision>`), or drop '8.0' from [tool.kernlock] gpu-archs")
    assert (problem["target"], problem["variant"], problem["arch"]) == (CU130, CU130_VARIANT, "8.0")
    text = cli("verify", cwd=project).output  # the text report: one line, with its fix
    assert "declared GPU arch 8.0 of target" in text and "drop '8.0' from [tool.kernlock] gpu-archs" in text


def test_verify_fails_offline_for_a_declared_a100_pool_against_a_9_0_only_build(
        hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hopper-only build (`9.0a`, as FlashAttention-3 ships) and a cluster with an A100 node pool: `verify`
    fails with the Hub unreachable, naming arch 8.0, the target and the variant; the H100 pool alone passes."""
    project = make_project(tmp_path / "p", kernels=[f"{HOPPER}@v1"], targets=[CU130, CPU],
                           extra='gpu-archs = ["H100", "A100"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: any request would fail the verify
    found = _gpu_archs(project)
    assert found["exit"] != 0 and not found["check"]["ok"]
    [problem] = found["check"]["problems"]
    assert (problem["target"], problem["variant"], problem["arch"]) == (CU130, CU130_VARIANT, "8.0")
    assert problem["message"].endswith(f"is built for GPU archs 9.0a, which do not cover declared GPU arch 8.0 (A100) "
                                       f"of target {CU130}; kernels would refuse to load it there")
    assert "drop 'A100' from [tool.kernlock] gpu-archs" in problem["fix"]
    make_project(project, kernels=[f"{HOPPER}@v1"], targets=[CU130, CPU], extra='gpu-archs = ["H100"]\n')
    assert _gpu_archs(project)["exit"] == 0


@pytest.mark.parametrize(("declared", "ok"), [
    ('["10.0"]', True),
    ('["B200", "10.3"]', True),  # a GPU name; 10.3 is of the 10.0 family from 10.0 up
    ('{ "*-cu130-*" = ["10.0"], "*-cu128-*" = ["8.0"] }', True),  # per target: no cu128 target is locked
    ('{ "torch2.13-cxx11-cu130-x86_64-linux" = ["H100"] }', False),
    ('["9.0", "10.0"]', False),
    ('["gfx942"]', True),  # a ROCm arch says nothing about CUDA targets
])
def test_verify_passes_only_when_every_declared_arch_is_covered(hub: TestHub, tmp_path: Path, declared: str,
                                                                 ok: bool) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SM100}@v1"], targets=[CU130, CPU], extra=f"gpu-archs = {declared}\n")
    assert cli("lock", cwd=project).exit_code == 0
    found = _gpu_archs(project)
    assert found["check"]["ok"] is ok and (found["exit"] == 0) is ok, found
    if ok:
        assert found["check"]["problems"] == []
    else:
        assert all("arch 9.0" in p["message"] for p in found["check"]["problems"])


def test_kernel_builder_suffixes_match_as_kernels_matches_them(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SM100}@v2"], targets=[CU130],  # v2: 8.0, 9.0a, 10.0f+PTX
                           extra='gpu-archs = ["A100", "8.6", "H100", "10.0", "10.3", "9.2", "12.0"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    problems = _gpu_archs(project)["check"]["problems"]
    assert sorted(p["arch"] for p in problems) == ["12.0", "9.2"]  # 9.0a is exactly 9.0; 10.0f is the 10.x family


def test_without_gpu_archs_there_is_no_such_check(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SM100}@v1"], targets=[CU130, CPU])
    assert cli("lock", cwd=project).exit_code == 0
    found = _gpu_archs(project)
    assert found["exit"] == 0 and "gpu-archs" not in found["checks"] and "coverage" in found["checks"]


@pytest.mark.parametrize("bad", ['["9.0a"]', '["sm90"]', '[]', '{ "*" = "9.0" }'])
def test_a_malformed_gpu_archs_declaration_is_a_config_error(tmp_path: Path, bad: str) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SM100}@v1"], extra=f"gpu-archs = {bad}\n")
    result = cli("verify", cwd=project)
    assert result.exit_code == 2 and "[tool.kernlock] gpu-archs" in result.output, result.output


def test_verify_of_gpu_archs_is_offline_and_imports_no_torch(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{SM100}@v1"], targets=[CU130, CPU], extra='gpu-archs = ["A100"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    code = ("import sys, json; from kernlock._internal.verify.checks import verify; r = verify('.'); "
            "c = [c for c in r.checks if c.name == 'gpu-archs'][0]; "
            "print(json.dumps([len(c.problems), 'torch' in sys.modules]))")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}  # nowhere to go
    out = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == [1, False]


# ---------------------------------------------------------------- kernels as the oracle


@pytest.mark.parametrize("archs", [["10.0"], ["8.0", "9.0a", "10.0f+PTX"], ["8.0", "9.0"], ["7.5+PTX"], ["sm_90"], []])
def test_arch_covers_is_kernels_arch_validator(archs: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from kernlock._internal.compat.kernels_api import variant_metadata

    metadata = variant_metadata(json.dumps({
        "id": "_x_1", "name": "x-kernel", "version": 1, "license": "MIT", "python-depends": [],
        "backend": {"type": "cuda", "archs": archs}}).encode())
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    check = kernels_module("archs")._check_arch_incompatibility
    for capability in ((7, 5), (8, 0), (8, 6), (9, 0), (9, 2), (10, 0), (10, 3), (12, 0)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, c=capability: c)
        try:
            check(metadata, "v")
            kernels_says = True
        except RuntimeError:
            kernels_says = False
        assert arch_covers(archs, "cuda", "{}.{}".format(*capability)) is kernels_says, (archs, capability)


# ---------------------------------------------------------------- apply() on a (simulated) GPU


def _gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], initialised: bool = False) -> None:
    """A CUDA 13.0 machine with a GPU of `capability`, as kernels and kernlock read it (Torch here is a CPU build)."""
    import torch
    from packaging.version import Version

    cuda = kernels_module("backends").CUDA
    monkeypatch.setattr(kernels_module("backends"), "_backend", lambda: cuda(version=Version("13.0")))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialised)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)


def _refusal(hub: TestHub) -> str:
    return (f"{SM100}@v1 {CU130_VARIANT} at {rev_parse(hub.repo_path(SM100), 'v1')[:12]} is built for GPU archs 10.0, which do not "
            f"cover this GPU (CUDA capability 9.0); kernels would refuse to load it there; fix: lock a build of {SM100} "
            f"that supports 9.0 (`kernlock explain {SM100}`, then `kernlock lock {SM100}@<revision>`), or run on a GPU "
            "it supports")


def test_apply_refuses_a_10_0_only_build_on_an_h100_with_one_line_before_it_loads(
        hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    project, _ = locked_project([f"{SM100}@v1"], targets=[CU130, CPU])
    _gpu(monkeypatch, (9, 0))
    kernlock.apply(project / "kernels.lock", target=CU130)  # the GPU is not initialised yet: nothing read
    with pytest.raises(GpuArchError) as refused:
        kernels.get_kernel(SM100, version=1)
    assert str(refused.value) == _refusal(hub) and "\n" not in str(refused.value)
    assert isinstance(refused.value, RuntimeError)  # as kernels' ArchValidator raises
    assert not any(name.startswith("sm100_only") or "_sm100_only_" in name for name in sys.modules)  # never imported
    assert kernels.has_kernel(SM100, version=1) is False  # kernels' answer for a build this GPU cannot load
    assert kernels.get_kernel(SM100, version=1, check_arch=False).add is not None  # kernels' own opt-out is kept


def test_apply_refuses_at_once_where_torch_already_initialised_the_gpu(
        hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    project, _ = locked_project([f"{SM100}@v1"], targets=[CU130, CPU])
    _gpu(monkeypatch, (9, 0), initialised=True)
    with pytest.raises(GpuArchError) as refused:
        kernlock.apply(project / "kernels.lock", target=CU130)
    assert str(refused.value) == _refusal(hub)


def test_apply_loads_a_10_0_only_build_on_a_b200(
        hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    project, lock = locked_project([f"{SM100}@v1"], targets=[CU130, CPU])
    _gpu(monkeypatch, (10, 0), initialised=True)
    kernlock.apply(project / "kernels.lock", target=CU130)
    identity = kernels.get_kernel(SM100, version=1).KERNEL_IDENTITY
    assert (identity["commit"], identity["variant"]) == (lock.kernels[0].commit, CU130_VARIANT)
