"""Shell completion as docs/how-to/shell-completion.md documents it (click's `_KERNLOCK_COMPLETE`) (issue 27, item 15)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import REPO_ROOT

README = REPO_ROOT / "docs" / "how-to" / "shell-completion.md"
KERNLOCK = str(Path(sys.executable).with_name("kernlock"))


def _complete(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run([KERNLOCK], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


def test_the_documented_completion_command_prints_a_bash_script() -> None:
    text = README.read_text(encoding="utf-8")
    assert '"$(_KERNLOCK_COMPLETE=bash_source kernlock)"' in text
    script = _complete(_KERNLOCK_COMPLETE="bash_source")
    assert script.returncode == 0, script.stderr
    assert "_kernlock_completion()" in script.stdout and "complete -o nosort -F _kernlock_completion kernlock" in script.stdout
    checked = subprocess.run(["bash", "-n"], input=script.stdout, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    for shell in ("zsh", "fish"):
        assert re.search(rf"_KERNLOCK_COMPLETE={shell}_source kernlock", text)
        assert _complete(_KERNLOCK_COMPLETE=f"{shell}_source").returncode == 0


def test_completion_completes_commands_and_options() -> None:
    commands = _complete(_KERNLOCK_COMPLETE="bash_complete", COMP_WORDS="kernlock ver", COMP_CWORD="1")
    assert commands.returncode == 0 and "plain,verify" in commands.stdout.splitlines(), commands.stdout
    options = _complete(_KERNLOCK_COMPLETE="bash_complete", COMP_WORDS="kernlock verify --all", COMP_CWORD="2")
    assert "plain,--all-targets" in options.stdout.splitlines(), options.stdout


def test_the_documented_completion_lines_run_as_written(tmp_path: Path) -> None:
    """The bash and fish lines of docs/how-to/shell-completion.md run verbatim in bash (the zsh line's script is
    checked above: zsh is not on every machine); after the bash line, `kernlock` completes."""
    from helpers import markdown_blocks

    [block] = markdown_blocks(README.read_text(encoding="utf-8"), "bash")
    bash_line, zsh_line, fish_line = block.strip().splitlines()
    (tmp_path / ".config" / "fish" / "completions").mkdir(parents=True)
    env = {**os.environ, "HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    script = f"{bash_line}\ncomplete -p kernlock\n{fish_line}\n"
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "complete -o nosort -F _kernlock_completion kernlock" in done.stdout
    assert "kernlock" in (tmp_path / ".config" / "fish" / "completions" / "kernlock.fish").read_text()
    assert "zsh_source" in zsh_line
