"""A CPU machine's project with GPU-only entries syncs and vendors (issue 46, item 3): the layer kernels a
declared model brings in are `on cuda only`, so a CPU target skips them in `sync`, `sync --all-targets`,
`vendor` and `run --vendor`, where the quick start used to stop with a fix that changed nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import CPU, CUDA_130, FA2, cli, make_project, run_kernlock
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub
from scripts import tiny

LAYERS = {"kernels-community/liger-kernels@v4", "kernels-community/rotary@v2", "kernels-community/activation@v1"}


@pytest.mark.slow
def test_the_quick_start_on_a_cpu_machine_syncs_and_vendors_with_cuda_only_layer_kernels(hub: TestHub,
                                                                                        tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v4"], targets=[CPU, CUDA_130], extra='\nmodels = ["./model"]')
    tiny.model("sdpa").save_pretrained(project / "model")
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    cuda_only = {k.spec for k in lock.kernels if k.devices == ("cuda",)}
    assert cuda_only == LAYERS  # what made the tutorial's step 4 fail on a CPU machine
    for command in (["sync"], ["sync", "--all-targets"], ["vendor", str(tmp_path / "vendor")],
                    ["sync", "--target", CPU, "--verbose"]):
        done = cli(*command, cwd=project)
        assert done.exit_code == 0, (command, done.output)  # was: "has no locked variant for target …cpu…"
        assert "no locked variant" not in done.output
    verbose = cli("sync", "--target", CPU, "--verbose", cwd=project).output
    for spec in LAYERS:
        assert f"{spec} on {CPU}: skipped (loaded on cuda only)" in verbose, verbose
    vendored = {p.name for p in (tmp_path / "vendor").iterdir() if p.name.startswith("kernels--")}
    assert "kernels--kernels-community--flash-attn2" in vendored and "kernels--kernels-community--rotary" in vendored
    ran = run_kernlock("run", "--vendor", str(tmp_path / "vendor"), "--", sys.executable, "-c",
                       f"import kernels; kernels.get_kernel({FA2!r}, version=4); print('ran')", cwd=project)
    assert ran.returncode == 0 and ran.stdout.split() == ["ran"], ran.stdout + ran.stderr
