"""The start-up hook of `kernlock run` is never skipped without a word (issue 28 item 6).

Each test starts a child the way a launcher or a wrapper might (PYTHONPATH rewritten, a
ddtrace-run style sitecustomize of its own in front, `python -E`, two kernlock start-up
dirs) and checks that the child still applies the lock, or that one line says it cannot.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from helpers import FA2, LockedProjectFactory
from kernlock._internal.cli.commands.run import run_environment
from kernlock._internal.runtime.autoapply import STARTUP_DIR
from scripts.harness import kernlock_run, run

STARTUP = Path(STARTUP_DIR)
APPLIED = "import kernels, kernlock._internal.runtime.apply as p; print('applied' if p.active_lock() is not None else 'UNLOCKED')"


def launched(how: str) -> str:
    """Code for a parent under `kernlock run` that starts a child Python `how` and reports what the child printed."""
    return (
        "import subprocess\n"
        f"code = {APPLIED!r}\n"
        f"{how}\n"
        "tiny.result(child=child.stdout.split(), stderr=child.stderr)\n"
    )


@pytest.fixture
def project(locked_project: LockedProjectFactory) -> Path:
    return locked_project([f"{FA2}@v2"])[0]


@pytest.mark.slow
def test_a_child_that_overwrites_pythonpath_still_applies_the_lock(project: Path, tmp_path: Path) -> None:
    how = (f"env = {{**os.environ, 'PYTHONPATH': {str(tmp_path)!r}}}\n"
           "child = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True)")
    proc = kernlock_run(launched(how), project)
    assert proc.returncode == 0 and proc.result["child"] == ["applied"], (proc.stderr, proc.result)


@pytest.mark.slow
def test_a_child_started_with_a_rebuilt_environment_still_applies_the_lock(project: Path) -> None:
    how = ("env = {k: v for k, v in os.environ.items() if not k.startswith('KERNLOCK_') and k != 'PYTHONPATH'}\n"
           "child = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True)")
    proc = kernlock_run(launched(how), project)
    assert proc.returncode == 0 and proc.result["child"] == ["applied"], (proc.stderr, proc.result)


@pytest.mark.slow
def test_a_childs_own_sitecustomize_in_front_still_runs_and_the_lock_applies(project: Path, tmp_path: Path) -> None:
    tracer = tmp_path / "tracer"
    tracer.mkdir()
    (tracer / "sitecustomize.py").write_text("import os\nos.environ['TRACED'] = 'yes'\n")  # chains to nothing
    how = (f"env = {{**os.environ, 'PYTHONPATH': {str(tracer)!r} + os.pathsep + os.environ['PYTHONPATH']}}\n"
           "child = subprocess.run([sys.executable, '-c', code + '; import os; print(os.environ.get(\"TRACED\"))'], "
           "env=env, capture_output=True, text=True)")
    proc = kernlock_run(launched(how), project)
    assert proc.returncode == 0 and proc.result["child"] == ["applied", "yes"], (proc.stderr, proc.result)


def test_os_exec_with_a_rewritten_pythonpath_still_applies_the_lock(project: Path, tmp_path: Path) -> None:
    code = (f"os.environ['PYTHONPATH'] = {str(tmp_path)!r}\n"
            f"os.execv(sys.executable, [sys.executable, '-c', {APPLIED!r}])\n")
    proc = kernlock_run(code, project)
    assert proc.returncode == 0 and proc.stdout.split()[-1:] == ["applied"], proc.stderr


@pytest.mark.parametrize("flag", ["-E", "-I", "-S", "-BE"])
def test_kernlock_run_refuses_a_python_that_skips_the_hook(project: Path, flag: str) -> None:
    proc = run([sys.executable, "-m", "kernlock", "run", "--", sys.executable, flag, "-c", APPLIED], project)
    assert proc.returncode == 2 and "applied" not in proc.stdout and "UNLOCKED" not in proc.stdout
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: ") and f"{flag}" in line and "start-up hook" in line
    assert "drop the option" in line and "kernlock.apply()" in line
    fixed = run([sys.executable, "-m", "kernlock", "run", "--", sys.executable, "-c", APPLIED], project)
    assert fixed.returncode == 0 and fixed.stdout.split() == ["applied"], fixed.stderr


@pytest.mark.slow
def test_a_child_python_that_skips_the_hook_is_named_in_one_warning(project: Path) -> None:
    how = "child = subprocess.run([sys.executable, '-E', '-c', code], capture_output=True, text=True)"
    proc = kernlock_run(launched(how), project)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("kernlock: warning: ")]
    assert len(warnings) == 1 and "-E" in warnings[0] and "not locked" in warnings[0], proc.stderr
    assert "drop the option or call kernlock.apply()" in warnings[0]


def test_two_kernlock_startup_dirs_on_pythonpath_chain_once(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-env" / "_startup"
    shutil.copytree(STARTUP, other)  # another environment's kernlock, also on PYTHONPATH
    below = tmp_path / "below"
    below.mkdir()
    (below / "sitecustomize.py").write_text("import os\nos.environ['BELOW'] = os.environ.get('BELOW', '') + 'x'\n")
    hook = run_environment(project / "kernels.lock")
    path = f"{hook['PYTHONPATH']}:{other}:{below}"
    proc = run([sys.executable, "-c", APPLIED + "; import os; print(os.environ.get('BELOW'))"],
               project, **{**hook, "PYTHONPATH": path})
    assert proc.returncode == 0 and proc.stdout.split() == ["applied", "x"], proc.stderr[-2000:]
    assert "RecursionError" not in proc.stderr


@pytest.mark.parametrize("how", ["console script", "env -S console script", "python3.11-dbg", "py"])
def test_kernlock_run_refuses_a_hook_skipping_python_not_named_python(project: Path, tmp_path: Path, how: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if how in ("python3.11-dbg", "py"):  # py: the venv's Python linked under another name (issue 44, class 6)
        tool = bin_dir / how
        tool.symlink_to(sys.executable)
        command = [str(tool), "-E", "-c", APPLIED]
    else:
        tool = bin_dir / "train-tool"
        shebang = f"#!{sys.executable} -I" if how == "console script" else f"#!/usr/bin/env -S {sys.executable} -I"
        tool.write_text(f"{shebang}\n{APPLIED}\n")
        tool.chmod(0o755)
        command = [str(tool)]
    proc = run([sys.executable, "-m", "kernlock", "run", "--", *command], project)  # was: ran UNLOCKED, no word
    assert proc.returncode == 2 and "applied" not in proc.stdout and "UNLOCKED" not in proc.stdout, proc
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: ") and "skips Python's start-up hook" in line, line
    shown = f"`{tool} -E`" if how in ("python3.11-dbg", "py") else f"`{tool}` (its #! line runs Python with -I)"
    assert shown in line and "drop the option, or call kernlock.apply()" in line, line


@pytest.mark.slow
def test_a_child_python_under_another_name_with_minus_e_is_named_in_one_warning(project: Path, tmp_path: Path) -> None:
    tool = tmp_path / "py"
    tool.symlink_to(sys.executable)
    how = f"child = subprocess.run([{str(tool)!r}, '-E', '-c', 'print(\\'child ran\\')'], capture_output=True, text=True)"
    proc = kernlock_run(launched(how), project)  # was: the child ran unlocked without a word
    assert proc.returncode == 0 and proc.result["child"] == ["child", "ran"], proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("kernlock: warning: ")]
    assert len(warnings) == 1 and "`py -E`" in warnings[0] and "not locked" in warnings[0], proc.stderr


@pytest.mark.slow
def test_a_child_console_script_that_skips_the_hook_is_named_in_one_warning(project: Path, tmp_path: Path) -> None:
    tool = tmp_path / "train-tool"
    tool.write_text(f"#!{sys.executable} -I\nprint('tool ran')\n")
    tool.chmod(0o755)
    how = f"child = subprocess.run([{str(tool)!r}], capture_output=True, text=True)"
    proc = kernlock_run(launched(how), project)
    assert proc.returncode == 0 and proc.result["child"] == ["tool", "ran"], proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("kernlock: warning: ")]
    assert len(warnings) == 1 and "-I" in warnings[0] and "not locked" in warnings[0], proc.stderr
