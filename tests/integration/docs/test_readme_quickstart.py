"""The README's quick-start shell snippets, extracted and run verbatim against the test Hub (issue 27)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import (
    CPU,
    REPO_ROOT,
    quick_start_blocks,
    quick_start_section,
    run_bash,
    run_tiny_model_recipe,
)
from kernlock._internal.compat.kernels_api import line
from kernlock._internal.compat.transformers import use_kernels_repos
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub
from scripts.harness import only_locked_files_requested


@pytest.mark.slow
def test_every_quick_start_block_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    """lock, the `apply()` lines of train.py, `kernlock run -- trl sft` and verify, each block verbatim; the Python
    and TRL runs load the locked commit although the branch moved after locking."""
    lock_block, run_block, verify_block = quick_start_blocks("bash")
    [python_block] = quick_start_blocks("python")
    assert lock_block.startswith("cd my-training-project\nkernlock lock ")
    project = tmp_path / "my-training-project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "my-training-project"\nversion = "0"\n')
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    run_tiny_model_recipe(project)  # the tutorial's tiny ./model and ./data, which the README points to
    locked = run_bash(lock_block, tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    lock = load_lockfile(project / "kernels.lock")
    [entry] = [k for k in lock.kernels if k.repo == "kernels-community/flash-attn2"]
    assert "torch2.9-cxx11-cu128-x86_64-linux" in {str(t) for t in lock.targets}
    layers = {k.spec: k for k in lock.kernels if k.used_by}  # what Transformers kernelizes on the GPU target
    # the version this Transformers maps RMSNorm to (v4 in 5.25, v3 in 5.17-5.22)
    [liger] = {f"v{v}" for repo, v, _ in use_kernels_repos() if repo == "kernels-community/liger-kernels"}
    assert set(layers) == {f"kernels-community/liger-kernels@{liger}", "kernels-community/rotary@v2",
                           "kernels-community/activation@v1"}
    assert all(k.variant_for("torch2.9-cxx11-cu128-x86_64-linux") is not None and k.devices == ("cuda",)
               for k in layers.values())
    staged = subprocess.run(["git", "diff", "--cached", "--name-only"], cwd=project, capture_output=True, text=True)
    assert staged.stdout.split() == ["kernels.lock", "pyproject.toml"]

    assert entry.ref is not None
    moved = advance_branch(hub.repo_path(entry.repo), entry.ref)
    (project / "train.py").write_text(python_block)
    [machine] = [target for target in lock.targets if str(target) == CPU]  # what this CPU-only machine loads
    variant = entry.variant_for(machine)
    assert variant is not None
    # Transformers' default version (4; 3 for 5.17), which kernels 0.16 turns into the commit before it loads
    asked = f"version {entry.version}" if line().RESOLVER_CHAIN else f"revision {entry.commit}"
    bound = f"kernlock: {entry.repo} ({asked}) -> {entry.commit} [{variant.name}]"
    hub.reset_counts()
    trained = run_bash("python train.py", project, KERNLOCK_VERBOSE="1")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert bound in trained.stderr and moved not in trained.stderr, trained.stderr
    assert f"applied for {machine} (strict)" in trained.stderr
    only_locked_files_requested(hub, lock, machine)  # the cold load: the locked files only, at the locked commit
    import torch

    cpu_only = "" if torch.cuda.is_available() else " --use_cpu"  # TRL's bf16 default needs a GPU; the README says so
    assert "add `--use_cpu`, as the suite does" in " ".join(quick_start_section().split())
    sft = run_bash(run_block.rstrip("\n") + cpu_only, project, KERNLOCK_VERBOSE="1", HF_DATASETS_OFFLINE="1")
    assert sft.returncode == 0, sft.stdout[-3000:] + sft.stderr[-5000:]
    assert "Training completed" in sft.stdout + sft.stderr
    assert bound in sft.stderr and moved not in sft.stderr, sft.stderr[-5000:]
    assert f"applied for {machine} (strict)" in sft.stderr
    only_locked_files_requested(hub, lock, machine)  # and the warm TRL run asked for nothing else

    verified = run_bash(verify_block, project)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def ci_recipe_steps() -> list[str]:
    """The `kernlock` steps of the GitHub Actions job in docs/how-to/ci.md (valid YAML), verbatim (the install step needs the
    job's own checkout)."""
    import yaml

    text = (REPO_ROOT / "docs" / "how-to" / "ci.md").read_text(encoding="utf-8")
    start = text.index("```yaml\n# .github/workflows/kernels-lock.yml") + len("```yaml\n")
    workflow = yaml.safe_load(text[start:text.index("```", start)])
    steps = [step["run"] for step in workflow["jobs"]["kernlock"]["steps"] if "run" in step]
    return [step for step in steps if step.startswith("kernlock ")]


@pytest.mark.slow
def test_the_ci_recipe_runs_its_kernlock_steps_as_written(locked_project, tmp_path: Path) -> None:
    """The README's GitHub Actions job's `kernlock` steps pass on a fresh lock and fail on a stale one."""
    kernlock_steps = ci_recipe_steps()
    assert [step.split("  #")[0].strip() for step in kernlock_steps] == ["kernlock lock --check",
                                                                          "kernlock verify --all-targets --remote"]
    project = locked_project(["kernels-community/activation@v1"], ["torch2.13-cxx11-cpu-x86_64-linux"]).path
    for step in kernlock_steps:
        done = run_bash(step, project)
        assert done.returncode == 0, step + "\n" + done.stdout + done.stderr
    before = (project / "kernels.lock").read_bytes()
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('kernels = ["kernels-community/activation@v1"]',
                                                       'kernels = ["kernels-community/activation@v1", "kernels-community/tagged@v1"]'))
    assert run_bash(kernlock_steps[0], project).returncode == 1
    assert (project / "kernels.lock").read_bytes() == before


@pytest.mark.slow
def test_the_ci_recipe_fails_on_a_lock_edited_by_hand(locked_project) -> None:
    """A commit, a sha256 and a file list edited by hand in kernels.lock: the recipe, run as written, fails each time
    (the offline checks alone pass them: only the Hub knows)."""
    project, lock = locked_project(["kernels-community/flash-attn2@v2"], ["torch2.13-cxx11-cpu-x86_64-linux"])
    path = project / "kernels.lock"
    genuine = path.read_text()
    [entry] = lock.kernels
    locked_file = entry.variants[0].files[0]
    edits = {
        "commit": genuine.replace(entry.commit, "a" * 40),
        "sha256": genuine.replace(locked_file.sha256, "0" * 64),
        "file list": "".join(line for line in genuine.splitlines(keepends=True) if f'path = "{locked_file.path}"' not in line),
    }

    def recipe() -> list[int]:
        return [run_bash(step, project).returncode for step in ci_recipe_steps()]

    assert recipe() == [0, 0]
    for what, text in edits.items():
        assert text != genuine, what
        path.write_text(text)
        assert run_bash("kernlock verify --all-targets", project).returncode == 0, what  # offline: not caught
        assert 1 in recipe(), what
        assert path.read_text() == text  # the recipe changes nothing
    path.write_text(genuine)
    assert recipe() == [0, 0]
