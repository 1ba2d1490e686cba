"""`kernlock run --group G` (issue 48 item 5): the command's processes bind only G's kernels and the ungrouped ones;
a kernel only another group locks is refused at load, naming its group."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from helpers import ACTIVATION, CPU, FA2, RELU, UNIVERSAL, WITH_DEP, cli, make_project
from kernlock.testing.hub import TestHub
from scripts.harness import kernlock_run, run

GROUPS = f'''
[tool.kernlock.groups]
training = ["{ACTIVATION}@v1", "{RELU}@v1"]
inference = ["{FA2}@v2", "{WITH_DEP}@v1"]
'''

LOADS = (
    "import kernels\n"
    "from kernlock.errors import UnlockedKernelError\n"
    "loaded, refused = [], []\n"
    f"for repo, version in [({UNIVERSAL!r}, 1), ({ACTIVATION!r}, 1), ({RELU!r}, 1), ({FA2!r}, 2)]:\n"
    "    try:\n"
    "        kernels.get_kernel(repo, version=version)\n"
    "        loaded.append(repo)\n"
    "    except UnlockedKernelError as error:\n"
    "        refused.append(str(error))\n"
    "import subprocess\n"  # a child process of the command binds the same groups
    "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"KERNLOCK_GROUPS\"])'],\n"
    "                       capture_output=True, text=True, check=True).stdout.strip()\n"
    "tiny.result(loaded=loaded, refused=refused, child=child)\n"
)


@pytest.mark.slow
def test_run_group_binds_only_that_groups_kernels(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{UNIVERSAL}@v1"], targets=[CPU], extra=GROUPS)
    assert cli("lock", cwd=project).exit_code == 0
    training = kernlock_run(LOADS, project, "--group", "training")
    assert training.returncode == 0, training.stderr[-3000:]
    assert training.result["loaded"] == [UNIVERSAL, ACTIVATION, RELU] and training.result["child"] == "training"
    [refusal] = training.result["refused"]
    assert refusal.startswith(f"kernel {FA2} (version 2) is locked in {project / 'kernels.lock'} for group inference "
                              "only, and this run binds group training; fix: choose its group too: `kernlock run ")
    # the fix, as printed: both groups
    options = re.search(r"`kernlock run (.*) -- …`", refusal).group(1)
    assert options == "--group training --group inference"
    both = kernlock_run(LOADS, project, *options.split())
    assert both.returncode == 0, both.stderr[-3000:]
    assert both.result["loaded"] == [UNIVERSAL, ACTIVATION, RELU, FA2] and both.result["refused"] == []
    inference = kernlock_run(LOADS, project, "--group", "inference")
    assert inference.result["loaded"] == [UNIVERSAL, ACTIVATION, FA2]
    assert [line.split(" (")[0] for line in inference.result["refused"]] == [f"kernel {RELU}"]


def test_run_with_an_unknown_group_refuses_before_the_command_starts(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{UNIVERSAL}@v1"], targets=[CPU], extra=GROUPS)
    assert cli("lock", cwd=project).exit_code == 0
    command = [sys.executable, "-c", "print('started')"]
    refused = run([sys.executable, "-m", "kernlock", "run", "--group", "trainig", "--", *command], project)
    assert refused.returncode == 2 and "started" not in refused.stdout
    [line] = refused.stderr.splitlines()
    fix = f"kernlock run --group training -- {shlex.join(command)}"
    assert line == f"kernlock: error: unknown group 'trainig' (did you mean training?); fix: run `{fix}`"
    fixed = run([sys.executable, "-m", *shlex.split(fix)], project)
    assert fixed.returncode == 0 and fixed.stdout == "started\n", fixed.stderr
