"""`make demo`'s script: lock -> verify -> training under kernlock.apply(), and it keeps the project it made."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT
from kernlock._internal.lockfile.serialize import load_lockfile


@pytest.mark.slow
def test_the_demo_trains_on_the_locked_kernel_and_keeps_its_project(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "demo.sh")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    losses = [float(x) for x in re.findall(r"^step \d+: loss ([0-9.]+)$", done.stdout, re.M)]
    assert len(losses) == 3 and losses[-1] < losses[0], done.stdout
    kept = re.search(r"^== kept: the project at (\S+), its lock at (\S+)$", done.stdout, re.M)
    assert kept is not None, done.stdout
    project, lockfile = Path(kept[1]), Path(kept[2])
    assert lockfile == project / "kernels.lock" and project.is_relative_to(tmp_path)
    [entry] = load_lockfile(lockfile).kernels
    assert f"loaded {entry.repo} at commit {entry.commit} variant " in done.stdout
    assert (project / "train.py").is_file() and not (project.parent / "hub").exists()  # the Hub's repos went
