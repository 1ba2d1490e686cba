"""The docs' own shell blocks, run as written: the tutorial's cluster job (docs/tutorial/quick-start.md, step 4,
with a stand-in `srun` that runs its command here) and the offline/vendor job script (docs/how-to/offline-vendor.md)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FA2, REPO_ROOT, LockedProjectFactory, markdown_blocks

TUTORIAL = REPO_ROOT / "docs" / "tutorial" / "quick-start.md"
OFFLINE = REPO_ROOT / "docs" / "how-to" / "offline-vendor.md"
# `srun [--option…] CMD…` on one node: drop the options, run the command (what one job step does on a 1-node job).
SRUN = '#!/usr/bin/env bash\nwhile [[ $# -gt 0 && $1 == --* ]]; do shift; done\nexec "$@"\n'


def tutorial_cluster_block() -> str:
    text = TUTORIAL.read_text(encoding="utf-8")
    section = text[text.index("## 4. Warm the cache and launch the job"):text.index("## 5.")]
    [block] = markdown_blocks(section, "bash")
    return block


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "SCRATCH": str(tmp_path / "scratch"), **extra}


@pytest.mark.slow
def test_the_tutorials_cluster_job_runs_as_written(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    shutil.copy(REPO_ROOT / "examples" / "cluster" / "train.py", project / "train.py")
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "srun").write_text(SRUN)
    (stubs / "srun").chmod(0o755)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = _env(tmp_path, SLURM_NNODES="1", GPUS_PER_NODE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env["PATH"] = f"{stubs}{os.pathsep}{env['PATH']}"
    env.pop("HF_HOME", None)
    (tmp_path / "scratch").mkdir()
    done = _bash(tutorial_cluster_block(), project, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    for rank in (0, 1):
        assert f"rank {rank}/2: kernel {FA2} {entry.commit}" in done.stdout, done.stdout[-3000:]
        assert f"rank {rank}/2: step 1 loss" in done.stdout


def test_the_offline_job_script_runs_as_written(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project, lock = locked_project([FA2])
    [block] = markdown_blocks(OFFLINE.read_text(encoding="utf-8"), "bash")
    assert 'kernlock vendor "$SCRATCH/kernels"' in block
    (tmp_path / "scratch").mkdir()
    shown = 'printf "apply=%s vendor=%s path=%s\\n" "$KERNLOCK_APPLY" "$KERNLOCK_VENDOR_DIR" "${PYTHONPATH%%:*}"\n'
    done = _bash(block + shown, project, _env(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    vendor = tmp_path / "scratch" / "kernels"
    assert (vendor / "kernels.lock").is_file()
    assert f"apply=1 vendor={vendor.resolve()} path=" in done.stdout, done.stdout
    startup = done.stdout.rsplit("path=", 1)[1].strip()
    assert (Path(startup) / "sitecustomize.py").is_file()
