"""The how-to guides on builds appended to a locked branch and on advisories (docs/how-to/new-torch.md,
docs/how-to/advisories.md), their blocks run verbatim (issue 37)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import CPU, CUDA_130, CUDA_X86, FA2, REPO_ROOT, markdown_blocks
from kernlock._internal.fs import tomlio
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.spec.advisories import parse_advisories
from kernlock.testing.fixtures import move_branch, rev_parse
from kernlock.testing.hub import TestHub

PAGES = {"appended": "docs/how-to/new-torch.md", "advisories": "docs/how-to/advisories.md"}


def section_blocks(page: str, language: str) -> list[str]:
    """The ```language blocks of the docs page `page` (a key of PAGES), in order."""
    return markdown_blocks((REPO_ROOT / PAGES[page]).read_text(encoding="utf-8"), language)


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_appended_section_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    [block] = section_blocks("appended", "bash")
    repo = hub.repo_path("kernels-community/appended")
    tip = rev_parse(repo, "v1")
    move_branch(repo, "v1", rev_parse(repo, "v1~1"))  # locked before the torch 2.14 builds were appended
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "p"\nversion = "0"\n\n[tool.kernlock]\nkernels = ["kernels-community/appended@v1"]\n'
        f'targets = ["{CPU}", "{CUDA_X86}"]\n')
    assert _bash("kernlock lock", project).returncode == 0
    before = load_lockfile(project / "kernels.lock")
    move_branch(repo, "v1", tip)

    ran = _bash(block, project)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"(moved to {tip[:12]}: builds appended, locked variants unchanged)" in ran.stdout + ran.stderr
    assert "commit for torch2.14-cxx11-cpu-x86_64-linux: " in ran.stdout
    after = load_lockfile(project / "kernels.lock")
    for target in (CPU, CUDA_X86):
        assert after.kernel("kernels-community/appended@v1", target).variant_for(target).files == \
            before.kernel("kernels-community/appended@v1", target).variant_for(target).files


def test_advisories_section_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    config, advisory, _ignores = section_blocks("advisories", "toml")  # the ignores: test_advisory_ignores.py
    [block] = section_blocks("advisories", "bash")
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n' + config)
    (project / "advisories.toml").write_text(advisory)
    # the README's entry is the bundled example's, less its details
    shown = parse_advisories(tomlio.loads(advisory), "README")
    bundled = parse_advisories(tomlio.loads((REPO_ROOT / "examples/advisories/kernels-community.toml").read_text()), "x")
    assert [(a.id, a.repo, a.branch, a.variants, a.fix) for a in shown] == \
        [(a.id, a.repo, a.branch, a.variants, a.fix) for a in bundled]

    ran = _bash(block, project)

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "is advised by KC-2026-1085 (kernels-community#1085)" in ran.stdout + ran.stderr
    lock = load_lockfile(project / "kernels.lock")
    assert lock.kernel(f"{FA2}@v3", CUDA_X86).ref == "v2"
    assert lock.kernel(f"{FA2}@v3", CUDA_130).ref == "v3"
