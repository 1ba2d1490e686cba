"""`verify --against CHECKPOINT` compares what ran (issue 46, item 4): the checkpoint's recorded files, by sha256,
so a move to a commit whose build is byte for byte the same passes, and a changed file fails, named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import CPU, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch, git, move_branch, rev_parse
from kernlock.testing.hub import TestHub
from scripts.harness import ok, python

APPENDED = "kernels-community/appended"  # v1 #2 appends torch 2.14 builds, the older ones byte for byte the same
TORCH214 = "torch2.14-cxx11-cpu-x86_64-linux"


@pytest.mark.slow
def test_a_byte_identical_move_passes_and_a_changed_file_fails_named(hub: TestHub, tmp_path: Path) -> None:
    repo = hub.repo_path(APPENDED)
    tip = rev_parse(repo, "v1")
    move_branch(repo, "v1", rev_parse(repo, "v1~1"))
    project = make_project(tmp_path / "p", kernels=[f"{APPENDED}@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    move_branch(repo, "v1", tip)
    ran = load_lockfile(project / "kernels.lock").kernel(f"{APPENDED}@v1")
    assert ran is not None and ran.commit != tip
    # a real run's record: what the process loaded under the lock, kept as a checkpoint keeps it
    record = ok(python(f"import kernels, kernlock\nkernlock.apply()\nkernels.get_kernel({APPENDED!r}, version=1)\n"
                       "tiny.result(record=kernlock.loaded())", project))["record"]
    [loaded] = record["kernels"]
    assert loaded["commit"] == ran.commit and loaded["files"] and all(len(h) == 64 for h in loaded["files"].values())
    checkpoint = project / "out" / "checkpoint-1"
    checkpoint.mkdir(parents=True)
    (checkpoint / "kernlock.json").write_text(json.dumps(record))
    assert cli("verify", "--against", "out/checkpoint-1", cwd=project).exit_code == 0
    # the project is a git checkout: the lock the run recorded is committed
    git(project, "init", "-q")
    git(project, "add", "kernels.lock", "pyproject.toml")
    git(project, "commit", "-qm", "lock")
    trained = git(project, "rev-parse", "HEAD").decode().strip()

    # documented as changing nothing that ran: a new target moves the entry to a commit with the same bytes
    assert cli("lock", "--target", TORCH214, cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernel(f"{APPENDED}@v1").commit == tip
    same = cli("verify", "--against", "out/checkpoint-1", cwd=project)
    assert same.exit_code == 0 and "ok   against (1 kernel of out/checkpoint-1" in same.output, same.output

    # a rebuild that changes a file of the build that ran: named
    moved = advance_branch(repo, "v1")
    assert cli("lock", "-P", APPENDED, cwd=project).exit_code == 0
    changed = cli("verify", "--against", "out/checkpoint-1", cwd=project)
    assert changed.exit_code == 1, changed.output
    variant = loaded["variant"]
    assert (f"out/checkpoint-1 loaded {APPENDED} {ran.commit[:12]} [{variant}]; the lock now loads {moved[:12]} "
            f"[{variant}], whose appended/__init__.py differs (and 1 more)") in changed.output, changed.output
    # the fix names the project's commit that holds the run's lock, and restoring it passes again
    restore = re.search(r"git commit (\w+) holds it \(`(git restore [^`]+)`\)", changed.output)
    assert restore is not None and trained.startswith(restore[1]), changed.output
    git(project, *restore[2].split()[1:])
    assert "ok   against (1 kernel of out/checkpoint-1" in cli("verify", "--against", "out/checkpoint-1", cwd=project).output
