"""The README's quick-start shell snippets, extracted and run verbatim against the test Hub (issue 27)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT
from kernlock.store.lockfile_io import load_lockfile
from kernlock.testing.hub import TestHub


def quick_start_blocks(language: str) -> list[str]:
    """The ```language blocks of the README's "Quick start" section, in order."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):]
    section = section[:section.index("\n## ", 3)]
    blocks, rest = [], section
    while f"```{language}\n" in rest:
        start = rest.index(f"```{language}\n") + len(language) + 4
        end = rest.index("```", start)
        blocks.append(rest[start:end])
        rest = rest[end + 3:]
    return blocks


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_quick_start_lock_and_verify_snippets_run_as_written(hub: TestHub, tmp_path: Path) -> None:
    lock_block, run_block, verify_block = quick_start_blocks("bash")
    assert lock_block.startswith("cd my-training-project\nkernlock lock ")
    assert run_block.strip().startswith("kernlock run -- trl sft")  # needs TRL and a model: not run here
    project = tmp_path / "my-training-project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "my-training-project"\nversion = "0"\n')
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    locked = _bash(lock_block, tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    lock = load_lockfile(project / "kernels.lock")
    assert [k.repo for k in lock.kernels] == ["kernels-community/flash-attn2"]
    assert "torch2.9-cxx11-cu128-x86_64-linux" in {str(t) for t in lock.targets}
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=project, capture_output=True, text=True)
    assert staged.stdout.split() == ["kernels.lock", "pyproject.toml"]
    verified = _bash(verify_block, project)
    assert verified.returncode == 0, verified.stdout + verified.stderr
