"""The CI lane recipe (issue 48, docs/how-to/ci-lanes.md): docs/examples/kernlock-ci-lanes.sh, run the way
docs/examples/kernlock-ci-lanes.yml runs it, on the test Hub: lane 1 passes offline, lane 2 fails once the
locked branch moves, printing the old and the new commit."""

from __future__ import annotations

import shutil

import pytest
import yaml

from helpers import ACTIVATION, REPO_ROOT, LockedProjectFactory, run_bash
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub

EXAMPLES = REPO_ROOT / "docs" / "examples"


def _lane_steps() -> dict[str, list[str]]:
    """The `run` steps of each job of the workflow that run a lane of the script (the others install
    kernlock)."""
    workflow = yaml.safe_load((EXAMPLES / "kernlock-ci-lanes.yml").read_text(encoding="utf-8"))
    return {name: [s["run"] for s in job["steps"] if s.get("run", "").startswith("bash ci/")]
            for name, job in workflow["jobs"].items()}


@pytest.mark.slow
def test_lane_one_passes_offline_and_lane_two_fails_on_a_moved_branch(hub: TestHub,
                                                                     locked_project: LockedProjectFactory) -> None:
    project, lock = locked_project([f"{ACTIVATION}@v1"])
    [entry] = lock.kernels
    locked_text = (project / "kernels.lock").read_text()
    (project / "ci").mkdir()
    shutil.copy(EXAMPLES / "kernlock-ci-lanes.sh", project / "ci" / "kernlock-ci-lanes.sh")
    steps = _lane_steps()
    assert steps == {"lane1": ["bash ci/kernlock-ci-lanes.sh lane1"], "lane2": ["bash ci/kernlock-ci-lanes.sh lane2"]}

    floated = run_bash(steps["lane2"][0], project)
    assert floated.returncode == 0, floated.stdout + floated.stderr  # nothing moved yet: the nightly job passes

    moved = advance_branch(hub.repo_path(ACTIVATION), "v1")
    hub.reset_counts()
    blocking = run_bash(steps["lane1"][0], project)
    assert blocking.returncode == 0, blocking.stdout + blocking.stderr
    assert sum(hub.requests.values()) == 0  # offline

    floated = run_bash(steps["lane2"][0], project)
    assert floated.returncode == 1, floated.stdout + floated.stderr
    assert f"{ACTIVATION}@v1: {entry.commit[:12]} -> {moved[:12]} (branch moved)" in floated.stdout
    assert f"branch moved; kernlock lock -P {ACTIVATION}" in floated.stdout  # outdated's row
    assert (project / "kernels.lock").read_text() == locked_text  # a dry run: nothing written
    assert '"changes"' in (project / "kernlock-upgrade.json").read_text()
