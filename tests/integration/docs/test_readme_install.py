"""The README's install commands, run as written in a fresh virtual environment (the clone is a copy of this checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO_ROOT, copy_checkout


def readme_install_lines() -> list[str]:
    """The commands of the README's install block that need no extra (`[transformers]`, `[trl]` pull in large stacks)."""
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index("## Install")
    block = text[text.index("```bash\n", start) + len("```bash\n"):text.index("```", text.index("```bash\n", start) + 7)]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "git clone")) and "[" not in line]


@pytest.mark.slow
def test_the_readmes_install_commands_work(tmp_path: Path) -> None:
    lines = readme_install_lines()
    assert lines == ["pip install ./kernlock", "pip wheel --no-deps -w dist ./kernlock && pip install dist/kernlock-*.whl"]
    copy_checkout(tmp_path / "kernlock")  # what `git clone … kernlock` leaves
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv),
           "PIP_NO_COMPILE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # pip's own settings: no .pyc for a throwaway venv
    env.pop("PYTHONPATH", None)
    for line in lines:
        done = subprocess.run(["bash", "-ec", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        installed = subprocess.run([str(venv / "bin" / "kernlock"), "--help"], capture_output=True, text=True, env=env)
        assert installed.returncode == 0 and "Lock Hugging Face Hub kernels" in installed.stdout, installed.stderr
