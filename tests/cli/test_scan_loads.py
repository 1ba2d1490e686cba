"""`--scan` beyond `attn_implementation` (issue 43): Accelerate's sequence-parallel attention in its
three spellings, a project's own literal `get_kernel` calls, and the kernels the TRL trainers it
imports load by call (TRL 1.16's async GRPO packing: flash-attn3 v1 on CUDA, aiter-flash-attn v2 on
ROCm), each named with its file and line; read as text, never imported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import CPU, CUDA_130, FA2, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.project.scan import scan_paths
from kernlock.testing.hub import TestHub

KC = "kernels-community/"
ROCM = "torch2.13-cxx11-rocm71-x86_64-linux"
TRAIN = "from trl.experimental.async_grpo import AsyncGRPOTrainer\n\ntrainer = AsyncGRPOTrainer(model='m')\n"


def test_scan_reads_sequence_parallel_attention_in_each_spelling(tmp_path: Path) -> None:
    (tmp_path / "accelerate.yaml").write_text(
        "parallelism_config:\n  sp_backend: deepspeed\n  sp_attn_implementation: kernels-community/flash-attn2@v4\n")
    (tmp_path / "launch.sh").write_text(
        "accelerate launch --parallelism_config_sp_attn_implementation kernels-community/relu@v1 train.py\n"
        "PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION=kernels-community/universal accelerate launch t.py\n")
    (tmp_path / "train.py").write_text(
        "import os\nos.environ['PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION'] = 'kernels-community/tagged@v1'\n"
        "ParallelismConfig(sp_attn_implementation='sdpa')\n")
    found = {(s.key, Path(s.origin.where).name, s.origin.line) for s in scan_paths([tmp_path])}
    assert found == {(f"{FA2}@v4", "accelerate.yaml", 3), (f"{KC}relu@v1", "launch.sh", 1),
                     (f"{KC}universal", "launch.sh", 2), (f"{KC}tagged@v1", "train.py", 2)}


def test_scan_reads_literal_get_kernel_calls_with_the_device_their_branch_implies(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\nfrom kernels import get_kernel\n\n"
        "relu = get_kernel('kernels-community/relu', version=1)\n"
        "def pick():\n"
        "    if torch.version.hip:\n"
        "        return get_kernel('kernels-community/aiter-flash-attn', version=2)\n"
        "    return get_kernel('kernels-community/flash-attn3', revision='v1')\n"
        "get_kernel(name_from_config, version=1)  # not a literal: not a spec\n")
    found = {(s.key, s.origin.line, s.devices) for s in scan_paths([tmp_path])}
    assert found == {(f"{KC}relu@v1", 4, ()), (f"{KC}aiter-flash-attn@v2", 7, ("rocm",)),
                     (f"{KC}flash-attn3@v1", 8, ("cuda",))}


def test_scan_follows_the_trl_trainers_a_project_imports(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "sft.py").write_text("from trl import SFTTrainer\n")
    found = {(s.key, s.devices, s.origin.where) for s in scan_paths([tmp_path])}
    site = "trl/experimental/async_grpo/packing.py"
    assert {(key, devices) for key, devices, _ in found} == {
        (f"{KC}aiter-flash-attn@v2", ("rocm",)), (f"{KC}flash-attn3@v1", ("cuda",))}
    assert all(where.startswith(site) and "(imported at " in where and where.endswith("train.py:1)") for _, _, where in found)


def test_a_hostile_scanned_file_is_skipped_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text("x = " + "+".join(["1"] * 20000) + "\n")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "ok.py").write_text("load(attn_implementation='kernels-community/relu@v1')\n")
    skipped: list[str] = []
    found = [s.key for s in scan_paths([tmp_path], skipped)]
    assert found == [f"{KC}relu@v1"]
    assert len(skipped) == 2 and any("zero.py is not a regular file" in line for line in skipped), skipped
    assert any("deep.py nests too deep" in line for line in skipped), skipped


def test_lock_scan_locks_trl_packing_kernels_per_device_and_names_the_site(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path, kernels=[f"{KC}universal"], targets=[CUDA_130, CPU, ROCM],
                           extra='\nscan = ["train.py"]')
    (project / "train.py").write_text(TRAIN)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    entries = {k.spec: k for k in lock.kernels}
    assert set(entries) == {f"{KC}universal", f"{KC}flash-attn3@v1", f"{KC}aiter-flash-attn@v2"}
    fa3, aiter = entries[f"{KC}flash-attn3@v1"], entries[f"{KC}aiter-flash-attn@v2"]
    assert fa3.devices == ("cuda",) and [str(t) for v in fa3.variants for t in v.targets] == [CUDA_130]
    assert aiter.devices == ("rocm",) and [str(t) for v in aiter.variants for t in v.targets] == [ROCM]
    assert any("trl/experimental/async_grpo/packing.py:165" in use for use in fa3.used_by), fa3.used_by
    shown = json.loads(cli("show", "--json", cwd=project).output)
    assert any("packing.py" in json.dumps(k) for k in shown["kernel"] if k["spec"] == f"{KC}flash-attn3@v1")
    assert not any(m.startswith("trl.experimental") for m in sys.modules)  # read, never imported
