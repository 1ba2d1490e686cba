"""A run's record (issue 37): `kernlock.loaded()`, `kernlock.json` in every Trainer checkpoint under
`kernlock run`, and `kernlock verify --against CHECKPOINT`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, FA2, REPO_ROOT, cli, tiny_model_and_data
from kernlock._internal.lockfile.run_record import variant_content
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub
from scripts.harness import python


def readme_block() -> tuple[str, str]:
    """The tutorial's run-record commands: the `kernlock run -- trl sft` line and the `verify --against` line."""
    text = (REPO_ROOT / "docs" / "tutorial" / "quick-start.md").read_text(encoding="utf-8")
    start = text.index("```bash\n", text.index("## 5. Record what the run loaded")) + len("```bash\n")
    run, verify = text[start:text.index("```", start)].rstrip("\n").rsplit("\n", 1)
    return run, verify


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "HF_DATASETS_OFFLINE": "1"}


@pytest.mark.slow
def test_loaded_returns_what_this_process_loaded_under_the_lock(locked_project) -> None:
    project, lock = locked_project([f"{FA2}@v4"], [CPU])
    done = python("import kernlock\nbefore = kernlock.loaded()\nkernlock.apply()\nempty = kernlock.loaded()\n"
                  f"from kernels import get_kernel\nget_kernel({FA2!r}, version=4)\n"
                  "tiny.result(before=before, empty=empty, after=kernlock.loaded())", project)
    assert done.returncode == 0, done.stderr
    [entry] = lock.kernels
    variant = entry.variant_for(CPU)
    assert variant is not None
    result = done.result
    assert result["before"] is None and result["empty"]["kernels"] == []
    assert result["after"]["target"] == CPU and result["after"]["lockfile"] == str(project.resolve() / "kernels.lock")
    assert result["after"]["lock-sha256"] == __import__("hashlib").sha256((project / "kernels.lock").read_bytes()).hexdigest()
    assert result["after"]["kernels"] == [{"repo": FA2, "spec": f"{FA2}@v4", "commit": entry.commit,
                                           "variant": variant.name, "content": variant_content(variant),
                                           "files": {f.path: f.sha256 for f in variant.files}}]


@pytest.mark.slow
def test_kernlock_run_trl_sft_records_each_checkpoint_and_verify_against_follows_the_lock(
        hub: TestHub, locked_project, tmp_path: Path) -> None:
    project, lock = locked_project([FA2], [CPU])
    tiny_model_and_data(project)
    hub.reset_counts()
    run_line, verify_line = readme_block()
    import torch

    cpu_only = "" if torch.cuda.is_available() else " --use_cpu"  # the README says to add it without a GPU
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", run_line + cpu_only], cwd=project, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    [entry] = lock.kernels
    variant = entry.variant_for(CPU)
    assert variant is not None
    for checkpoint in ("checkpoint-1", "checkpoint-2"):
        record = json.loads((project / "out" / checkpoint / "kernlock.json").read_text())
        assert record["target"] == CPU and record["kernels"] == [
            {"repo": FA2, "spec": FA2, "commit": entry.commit, "variant": variant.name,
             "content": variant_content(variant), "files": {f.path: f.sha256 for f in variant.files}}]
    assert (project / "out" / "kernlock.json").is_file()
    kinds = {kind for kind in hub.requests if kind not in ("agent-registry",)}
    assert "tree" not in kinds and "refs" not in kinds  # the record costs no Hub request (downloads are the load's)

    same = subprocess.run(["bash", "-c", verify_line], cwd=project, env=_env(), capture_output=True, text=True)
    assert same.returncode == 0 and "ok   against (1 kernel of out/checkpoint-2" in same.stdout, same.stdout + same.stderr
    moved = advance_branch(hub.repo_path(FA2), entry.ref or "v4")
    assert cli("lock", "-P", FA2, cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernels[0].commit == moved
    other = cli("verify", "--against", "out/checkpoint-2", cwd=project)
    assert other.exit_code == 1, other.output
    assert (f"out/checkpoint-2 loaded {FA2} {entry.commit[:12]} [{variant.name}]; the lock now loads "
            f"{moved[:12]} [{variant.name}]") in other.output
    missing = cli("verify", "--against", "out/nothing", cwd=project)
    assert missing.exit_code == 1 and "out/nothing: no readable kernlock.json" in missing.output
