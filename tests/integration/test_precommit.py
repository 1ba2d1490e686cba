"""The `kernlock-verify` pre-commit hook, run by the real `pre-commit` tool from a hook repo holding this checkout.

The hook repo is used as a project's `.pre-commit-config.yaml` names one (`repo` + `rev`), so pre-commit builds
the hook's environment once per session (`pre-commit try-repo` would build it anew on every call).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, CUDA_X86, REPO_ROOT, cli, copy_checkout, make_project
from kernlock.testing.hub import TestHub

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
TRAIN = "from transformers import AutoModel\n\nmodel = AutoModel.from_pretrained('m', attn_implementation='kernels-community/activation@v1')\n"

pytestmark = pytest.mark.skipif(not PRE_COMMIT.exists() and shutil.which("pre-commit") is None, reason="pre-commit is not installed")


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pre-commit cache per session, so the hook's environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture(scope="session")
def hook_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pre-commit config naming a hook repo that holds this checkout's files (uncommitted changes included)."""
    hook_repo = copy_checkout(tmp_path_factory.mktemp("hook-repo"))
    _git(hook_repo, "init", "-q", "-b", "main")
    _git(hook_repo, "add", "-A")
    _git(hook_repo, "commit", "-q", "-m", "checkout")
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hook_repo, check=True, capture_output=True, text=True).stdout
    config = tmp_path_factory.mktemp("hook-config") / ".pre-commit-config.yaml"
    config.write_text(f"repos:\n- repo: {hook_repo}\n  rev: {rev.strip()}\n  hooks:\n  - id: kernlock-verify\n")
    return config


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=_git_env())


def _git_env() -> dict[str, str]:
    return {
        **os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    }


def _hook(repo: Path, config: Path, home: Path) -> subprocess.CompletedProcess:
    _git(repo, "add", "-A")
    command = [str(PRE_COMMIT) if PRE_COMMIT.exists() else "pre-commit", "run", "--config", str(config),
               "--all-files", "--color", "never"]
    bindir = str(Path(sys.executable).parent)  # where `kernlock` is installed, as in the environment one commits from
    env = {**_git_env(), "PRE_COMMIT_HOME": str(home), "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("KERNLOCK_APPLY", None)
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_pre_commit_hook_scenarios(hub: TestHub, tmp_path: Path, hook_config: Path, pre_commit_home: Path) -> None:
    repo = make_project(tmp_path / "repo", kernels=["kernels-community/flash-attn2@v2"], targets=[CPU, CUDA_X86],
                        extra='scan = ["train.py"]\n')
    (repo / "train.py").write_text(TRAIN)
    assert cli("lock", cwd=repo).exit_code == 0
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "init")

    # 1. A fresh lock passes.
    result = _hook(repo, hook_config, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kernlock verify" in result.stdout and "Passed" in result.stdout

    # 2. Scanned code that adds an unlocked kernel fails, naming file and line.
    (repo / "train.py").write_text(TRAIN + "\nother = dict(attn_implementation=\"kernels-community/tagged@dev\")\n")
    result = _hook(repo, hook_config, pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed" in result.stdout
    assert "train.py:5: kernels-community/tagged@dev is not in the lock" in result.stdout
    assert "fix: kernlock lock" in result.stdout
    (repo / "train.py").write_text(TRAIN)

    # 3. A changed kernel list in pyproject.toml fails.
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("flash-attn2@v2", "flash-attn2@v3"))
    result = _hook(repo, hook_config, pre_commit_home)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "kernels-community/flash-attn2@v3 changed" in result.stdout

    # 4. Re-locking makes it pass again.
    assert cli("lock", cwd=repo).exit_code == 0
    result = _hook(repo, hook_config, pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr


def readme_hook_config() -> str:
    """The `.pre-commit-config.yaml` the README documents, verbatim."""
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index("```yaml\n# .pre-commit-config.yaml") + len("```yaml\n")
    return text[start:text.index("```", start)]


def test_the_readmes_hook_config_works_as_written(hub: TestHub, tmp_path: Path, pre_commit_home: Path) -> None:
    repo = make_project(tmp_path / "repo", kernels=["kernels-community/flash-attn2@v2"], targets=[CPU])
    config = repo / ".pre-commit-config.yaml"
    config.write_text(readme_hook_config())
    assert cli("lock", cwd=repo).exit_code == 0
    _git(repo, "init", "-q", "-b", "main")
    result = _hook(repo, config, pre_commit_home)
    assert result.returncode == 0 and "kernlock verify" in result.stdout and "Passed" in result.stdout, result.stdout
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("flash-attn2@v2", "flash-attn2@v3"))
    result = _hook(repo, config, pre_commit_home)
    assert result.returncode == 1 and "kernels-community/flash-attn2@v3 changed" in result.stdout, result.stdout


@pytest.mark.slow
def test_the_quick_starts_hook_fails_on_a_changed_attn_implementation_in_train_py(
    hub: TestHub, tmp_path: Path, pre_commit_home: Path,
) -> None:
    """The quick start as written (its lock command, its train.py lines, the README's hook): the hook passes, then
    fails when train.py's attn_implementation names another kernel, and passes again once it names the locked one."""
    from helpers import quick_start_blocks, run_bash, tiny_model_and_data

    lock_block = quick_start_blocks("bash")[0]
    [train] = quick_start_blocks("python")
    repo = tmp_path / "my-training-project"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "my-training-project"\nversion = "0"\n')
    _git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(train)
    tiny_model_and_data(repo)  # the model the lock command names
    locked = run_bash(lock_block, tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    config = repo / ".pre-commit-config.yaml"
    config.write_text(readme_hook_config())
    result = _hook(repo, config, pre_commit_home)
    assert result.returncode == 0 and "Passed" in result.stdout, result.stdout + result.stderr

    changed = train.replace('attn_implementation="kernels-community/flash-attn2"',
                            'attn_implementation="kernels-community/activation@v1"')
    assert changed != train
    (repo / "train.py").write_text(changed)
    result = _hook(repo, config, pre_commit_home)
    assert result.returncode == 1 and "Failed" in result.stdout, result.stdout + result.stderr
    line = next(n for n, text in enumerate(changed.splitlines(), 1) if "attn_implementation" in text)
    assert f"train.py:{line}: kernels-community/activation@v1 is not in the lock" in result.stdout, result.stdout

    (repo / "train.py").write_text(train)
    assert _hook(repo, config, pre_commit_home).returncode == 0
