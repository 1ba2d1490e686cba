"""Native fallback as a recorded, enforced fact (issue 43, item 3), on the CPU with a CUDA device type simulated.

* At lock time, a layer kernel a model brings in with no build for a target is `native` there, with the reason.
* Under strict `apply()`, a locked layer kernel whose files are gone from an offline cache stops the run with one
  line naming it: kernelize never silently keeps the layer's own forward for it.
* The run record names, per layer, the kernel that ran it or that it ran native and why.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from helpers import CUDA_130, FA2, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.spec.target import parse_target
from kernlock.testing.hub import TestHub
from scripts import tiny
from scripts.harness import python

LIGER = "kernels-community/liger-kernels"
ROTARY = "kernels-community/rotary"
ACTIVATION = "kernels-community/activation"
CU126 = "torch2.10-cxx11-cu126-x86_64-linux"  # the fixtures' layer kernels have no build for it

TRAIN = """
import kernlock
kernlock.apply()
import kernels._internals.validate as validate
validate.ArchValidator.validate_metadata = lambda self, **kw: None  # no GPU to ask
from kernels._internals.layer import repos
from transformers import AutoModelForCausalLM
repos._find_capability = lambda device_index=None: 90  # kernels asks the GPU for its capability; this is the CPU
model = AutoModelForCausalLM.from_pretrained("model")
model._kernels_device = "cuda"  # what from_pretrained(device_map="cuda") records
model.train()
tiny.result(layers=kernlock.loaded()["layers"])
"""

TRAINER = TRAIN.replace('tiny.result(layers=kernlock.loaded()["layers"])', """
import torch
from transformers import Trainer, TrainingArguments
rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 128, (4, 12)).tolist()]
args = TrainingArguments("out", max_steps=1, save_steps=1, per_device_train_batch_size=2, use_cpu=True,
                         report_to=[])
Trainer(model=model, args=args, train_dataset=rows).train()
tiny.result(ok=True)
""")


def _project(root: Path, targets: list[str]) -> Path:
    project = make_project(root, kernels=[FA2], targets=targets, extra='\nmodels = ["./model"]')
    tiny.model("sdpa").save_pretrained(project / "model")
    return project


def test_a_layer_kernel_without_a_build_for_a_target_is_locked_native_with_its_reason(hub: TestHub,
                                                                                     tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130, CU126])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert f"{LIGER}@v4 (" in result.output and f"has no build for {CU126}" in result.output  # said, not fatal
    lock = load_lockfile(project / "kernels.lock")
    assert lock.version == "1.4"
    for spec in (f"{LIGER}@v4", f"{ROTARY}@v2", f"{ACTIVATION}@v1"):
        entry = lock.kernel(spec)
        assert entry is not None and entry.native == (f"{CU126}: no build for this target",)
        assert entry.variant_for(CUDA_130) is not None and not entry.serves(parse_target(CU126))
    assert lock.kernel(FA2).variant_for(CU126) is not None  # what the user asked for still needs its build
    shown = cli("show", cwd=project).output
    assert "native (no build for this target)" in shown
    verified = cli("verify", "--all-targets", cwd=project)
    assert verified.exit_code == 0, verified.output
    assert f"note: {LIGER}@v4 is native on {CU126} (no build for this target)" in verified.output
    explained = cli("explain", ROTARY, "--target", CU126, cwd=project).output
    assert "the lock has native: no build for this target" in explained
    # a kernel the user declared himself is never silently native: no build is still an error
    strict = make_project(tmp_path / "q", kernels=[f"{LIGER}@v4"], targets=[CU126])
    refused = cli("lock", cwd=strict)
    assert refused.exit_code != 0 and f"has no build for {CU126}" in refused.output


@pytest.mark.slow
def test_the_run_record_names_the_bound_and_the_native_layers(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    lock = load_lockfile(project / "kernels.lock")
    done = python(TRAIN, project, KERNLOCK_TARGET=CUDA_130)
    assert done.returncode == 0, done.stdout + done.stderr
    layers = {row["layer"]: row for row in done.result["layers"]}
    liger = lock.kernel(f"{LIGER}@v4")
    assert layers["RMSNorm"] == {"layer": "RMSNorm", "repo": LIGER, "commit": liger.commit,
                                 "variant": liger.variant_for(CUDA_130).name}
    # SiLU's kernel is mapped for inference only: in training the layer runs Transformers' own code, and says why
    assert layers["SiLU"] == {"layer": "SiLU", "native": "no kernel in Transformers' mapping for this device and mode"}


@pytest.mark.slow
def test_a_trainer_checkpoints_run_record_names_the_bound_and_the_native_layers(hub: TestHub, tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    liger = load_lockfile(project / "kernels.lock").kernel(f"{LIGER}@v4")
    done = python(TRAINER, project, KERNLOCK_TARGET=CUDA_130)
    assert done.returncode == 0 and done.result["ok"], done.stdout + done.stderr
    record = json.loads((project / "out" / "checkpoint-1" / "kernlock.json").read_text())
    layers = {row["layer"]: row for row in record["layers"]}
    assert layers["RMSNorm"] == {"layer": "RMSNorm", "repo": LIGER, "commit": liger.commit,
                                 "variant": liger.variant_for(CUDA_130).name}
    assert layers["SiLU"]["native"] == "no kernel in Transformers' mapping for this device and mode"
    verified = cli("verify", "--against", "out/checkpoint-1", cwd=project)
    assert f"ok   against (2 kernels of out/checkpoint-1 on {CUDA_130})" in verified.output, verified.output


@pytest.mark.slow
def test_a_locked_layer_kernel_missing_from_an_offline_cache_stops_the_run_with_one_line(hub: TestHub,
                                                                                       tmp_path: Path) -> None:
    project = _project(tmp_path / "p", [CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    warm = python(TRAIN, project, KERNLOCK_TARGET=CUDA_130)
    assert warm.returncode == 0, warm.stdout + warm.stderr
    hf_home = Path(os.environ["HF_HOME"])  # the hub fixture's cache, which the child inherits
    cached = [p for p in hf_home.rglob("*") if p.is_dir() and "liger" in p.name]
    assert cached, sorted(str(p) for p in hf_home.rglob("*"))[:20]
    for path in cached:
        shutil.rmtree(path, ignore_errors=True)
    cold = python(TRAIN, project, KERNLOCK_TARGET=CUDA_130, HF_HUB_OFFLINE="1")
    assert cold.returncode != 0
    [line] = [line for line in cold.stderr.splitlines() if line.startswith("kernlock.errors.MissingFilesError: ")]
    assert f"{LIGER}@v4: " in line and "are not in the cache" in line and "the Hub is offline" in line, cold.stderr
    assert "fix: run `kernlock sync` where the Hub is reachable" in line
    assert "RESULT" not in cold.stdout  # the run stopped at kernelize: no layer ran native silently
    # lenient: the run goes on, and the record says the layer ran native and why
    lenient = python(TRAIN, project, KERNLOCK_TARGET=CUDA_130, HF_HUB_OFFLINE="1", KERNLOCK_STRICT="0")
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    layers = {row["layer"]: row for row in lenient.result["layers"]}
    assert layers["RMSNorm"]["native"].startswith("locked build not loaded: "), layers
    assert "running native (lenient mode)" in lenient.stderr


@pytest.mark.slow
def test_two_gloo_ranks_one_bound_one_native_for_a_layer_stop_with_the_table(hub: TestHub, tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    from scripts.harness import PRELUDE, child_env

    project = _project(tmp_path / "p", [CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    warm = python(TRAIN, project, KERNLOCK_TARGET=CUDA_130)  # rank 0's node: a warm cache
    assert warm.returncode == 0, warm.stdout + warm.stderr
    code = TRAIN.replace("kernlock.apply()\n", "kernlock.apply()\nimport torch.distributed as dist\n"
                                                 "dist.init_process_group('gloo')\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    per_rank = [{}, {"HF_HOME": str(tmp_path / "cold-node"), "HF_HUB_OFFLINE": "1", "KERNLOCK_STRICT": "0"}]
    procs = [subprocess.Popen([sys.executable, "-c", PRELUDE + code], cwd=project, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=child_env(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                            MASTER_PORT=port, KERNLOCK_TARGET=CUDA_130, **extra))
             for rank, extra in enumerate(per_rank)]
    ranks = [proc.communicate(timeout=180) for proc in procs]
    assert all(proc.returncode != 0 for proc in procs), ranks
    rank0 = ranks[0][1]
    problem = "RankMismatchError: the ranks of this job run RMSNorm"
    assert problem in rank0, rank0[-3000:]
    table = rank0[rank0.index(problem):]
    assert "ranks" in table and f"{LIGER}@" in table and "native (locked build not loaded:" in table
    assert "rank 1 stops: the ranks of this job run layers differently" in ranks[1][1], ranks[1][1][-3000:]
