"""A Torch upgrade is one command, and every message leads to it (issue 46, item 2): after the environment
reports a new Torch (`$KERNLOCK_TARGET`), `verify`, `run`, `explain` and a plain `lock` each name
`kernlock lock --target <this machine's target>`; running it makes `verify` pass, taking the build appended to the
locked branch and recording the declared model's layer kernels, which have no build there, as native."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from helpers import CPU, cli, make_project, run_kernlock
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import move_branch, rev_parse
from kernlock.testing.hub import TestHub
from scripts import tiny

APPENDED = "kernels-community/appended"  # v1 #2 appends torch 2.14 builds
LIGER = "kernels-community/liger-kernels"
FIX = re.compile(r"fix: `?(kernlock lock --target \S+?)`?$", re.MULTILINE)


def _fixes(text: str) -> set[str]:
    return set(FIX.findall(text))


@pytest.mark.parametrize(("old", "new", "model"), [
    ("torch2.13-cxx11-cu130-x86_64-linux", "torch2.14-cxx11-cu130-x86_64-linux", True),
    (CPU, "torch2.14-cxx11-cpu-x86_64-linux", False),
])
def test_every_message_after_a_torch_upgrade_names_the_one_command_that_covers_it(
        hub: TestHub, tmp_path: Path, old: str, new: str, model: bool) -> None:
    repo = hub.repo_path(APPENDED)
    tip = rev_parse(repo, "v1")
    move_branch(repo, "v1", rev_parse(repo, "v1~1"))  # locked before torch 2.14 builds were appended
    project = make_project(tmp_path / "p", kernels=[f"{APPENDED}@v1"], targets=[old],
                           extra='models = ["./model"]\n' if model else "")
    if model:
        tiny.model("sdpa").save_pretrained(project / "model")
    assert cli("lock", cwd=project).exit_code == 0
    move_branch(repo, "v1", tip)
    env = {"KERNLOCK_TARGET": new}  # what `pip install -U torch` makes this machine

    verified = run_kernlock("verify", cwd=project, env=env)
    ran = run_kernlock("run", "--", sys.executable, "-c", "print('ran')", cwd=project, env=env)
    explained = run_kernlock("explain", APPENDED, "--target", new, cwd=project, env=env)
    locked = run_kernlock("lock", cwd=project, env=env)
    command = f"kernlock lock --target {new}"
    for result in (verified, ran, locked):
        assert result.returncode == 1, result.stdout + result.stderr
    assert "ran" not in ran.stdout
    for result in (verified, ran, explained, locked):
        assert _fixes(result.stdout + result.stderr) == {command}, result.stdout + result.stderr
    assert f"the lock does not cover this machine ({new}, from $KERNLOCK_TARGET)" in locked.stderr
    if model:  # the model's layer kernel is named with the model that brought it in
        assert f"{LIGER}@v4 (what Transformers loads for model ./model)" in verified.stdout

    fixed = run_kernlock(*command.split()[1:], cwd=project, env=env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    lock = load_lockfile(project / "kernels.lock")
    assert lock.kernel(f"{APPENDED}@v1", new).commit == tip
    if model:  # no build of the model's layer kernels for the new Torch: native there, the model named
        [liger] = lock.for_repo(LIGER)
        assert liger.native_reason(new) == "no build for this target"
        assert f"{LIGER}@v4" in fixed.stderr and "./model: RMSNorm" in fixed.stderr and "native" in fixed.stderr
    after = run_kernlock("verify", cwd=project, env=env)
    assert after.returncode == 0, after.stdout + after.stderr
    assert run_kernlock("lock", cwd=project, env=env).returncode == 0  # covered now: a plain lock agrees
    assert run_kernlock("lock", "--check", cwd=project, env=env).returncode == 0
