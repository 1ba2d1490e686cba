"""Users' code type-checks against the lazy public API, and no tracked file holds merge-conflict markers.

The repository's own static gates, `ruff check .` and `mypy kernlock tests`, are not run here: `make lint` runs
them (and `.ci/run` runs `make lint`; `.pre-commit-config.yaml` runs them on each commit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT

ROOT = REPO_ROOT


def mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_public_api_is_typed_behind_the_lazy_init(tmp_path: Path) -> None:
    assert (ROOT / "kernlock" / "py.typed").is_file()
    user = tmp_path / "train.py"
    user.write_text(
        "import kernlock\n"
        "applied = kernlock.apply()\n"
        "reveal_type(applied.kernels)\n"
        "lockfile: kernlock.Lockfile = kernlock.load_lockfile('kernels.lock')\n"
        "try:\n    kernlock.verify()\nexcept kernlock.KernlockError as error:\n    reveal_type(error.fix)\n"
    )
    (tmp_path / "mypy.ini").write_text(  # as the project's own config: torch and Transformers are not followed
        "[mypy]\n\n[mypy-torch.*,transformers.*,torch,transformers]\nfollow_imports = skip\n")
    checked = mypy("--strict", str(user), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert 'Revealed type is "dict[str, tuple[str, str]]"' in checked.stdout
    assert 'Revealed type is "str | None"' in checked.stdout


def test_no_tracked_file_holds_merge_conflict_markers() -> None:
    """A merge left half-resolved (`<<<<<<< HEAD` … `>>>>>>> branch`) never lands, in docs or code."""
    listed = subprocess.run(["git", "grep", "-lE", "^(<<<<<<< |>>>>>>> )", "--", ".", ":!tests", ":!kernlock"],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    assert listed.returncode == 1 and not listed.stdout, listed.stdout
