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
@pytest.mark.slow
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


def _installed_torch(root: Path, version: str) -> dict[str, str]:
    """An environment whose installed torch is `version` (a distribution's metadata and `torch/version.py` ahead of
    the real one on the path; kernlock reads both without importing torch)."""
    import os

    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("")
    (root / "torch" / "version.py").write_text(f"__version__ = '{version}+cpu'\ncuda = None\nhip = None\nxpu = None\n")
    (root / f"torch-{version}+cpu.dist-info").mkdir()
    (root / f"torch-{version}+cpu.dist-info" / "METADATA").write_text(f"Name: torch\nVersion: {version}+cpu\n")
    return {"PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def test_an_untested_torch_is_warned_about_once_and_kernlock_goes_on(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{APPENDED}@v1"])
    assert cli("lock", cwd=project).exit_code == 0
    here = run_kernlock("verify", cwd=project)
    assert here.returncode == 0 and "tested with" not in here.stderr  # torch 2.13: inside the tested range

    env = _installed_torch(tmp_path / "site", "2.15.0")
    shown = run_kernlock("show", cwd=project, env=env)
    assert shown.returncode == 0, shown.stderr  # a warning, not a refusal
    warning = ("kernlock: warning: torch 2.15.0+cpu lies outside what kernlock 0.1.0 was tested with "
               "(torch>=2.9,<2.15, transformers>=5.17,<5.26, kernels>=0.16.2,<0.20; "
               "docs/reference/supported-versions.md)")
    assert shown.stderr.count("tested with") == 1 and shown.stderr.startswith(warning), shown.stderr
    # the upgraded machine is detected, not simulated: verify names the same one command
    verified = run_kernlock("verify", cwd=project, env=env)
    assert verified.stderr.count("tested with") == 1, verified.stderr
    assert verified.returncode == 1 and _fixes(verified.stdout) == {"kernlock lock --target torch2.15-cxx11-cpu-x86_64-linux"}


def test_the_tested_ranges_are_the_declared_ones() -> None:
    """The warning's ranges are pyproject.toml's: the `kernels` dependency and the `torch`/`transformers` extras."""
    import tomllib

    from helpers import REPO_ROOT
    from kernlock._internal.compat.tested import TESTED

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["torch"],
                *project["optional-dependencies"]["transformers"]]
    for name, (low, high) in TESTED.items():
        assert f"{name}>={low},<{high}" in declared, (name, declared)
    assert all(f"{name}>={low},<{high}" in (REPO_ROOT / "docs/reference/supported-versions.md").read_text()
               for name, (low, high) in TESTED.items())


def test_the_how_tos_verify_transcript_is_what_verify_prints(hub: TestHub, tmp_path: Path) -> None:
    """docs/how-to/new-torch.md's `kernlock verify` after `pip install -U torch`, run as written (the machine's new
    Torch simulated): every line it shows is what verify prints."""
    from helpers import REPO_ROOT, UNIVERSAL, markdown_blocks

    [block, *_] = markdown_blocks((REPO_ROOT / "docs/how-to/new-torch.md").read_text(encoding="utf-8"), "console")
    command, *shown = block.rstrip("\n").splitlines()
    assert command == "$ kernlock verify"
    project = make_project(tmp_path / "p", kernels=[f"{UNIVERSAL}@v1"])
    assert cli("lock", cwd=project).exit_code == 0
    verified = run_kernlock(*command.split()[2:], cwd=project, env={"KERNLOCK_TARGET": "torch2.14-cxx11-cpu-x86_64-linux"})
    assert verified.returncode == 1
    for line in shown:
        assert line in verified.stdout.splitlines(), (line, verified.stdout)
