"""All problems in one pass (issue 46, item 5): `lock` reports every kernel × target without a build together, one
line each (kernel, target, nearest builds with why each was refused in a short clause, a short fix), exit 1, nothing
written; `--json` has the full list."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import ACTIVATION, CPU, FA2, RELU, cli, make_project
from kernlock.testing.hub import TestHub

TORCH214 = "torch2.14-cxx11-cpu-x86_64-linux"
KERNELS = (f"{ACTIVATION}@v1", f"{FA2}@v1", RELU)  # none has a build for torch 2.14


def test_three_kernels_without_a_build_are_reported_in_one_run(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=KERNELS, targets=[CPU, TORCH214])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == "kernlock: error: 4 kernel builds are missing; nothing was written:", result.output
    rows = lines[1:-1]
    assert [row.split(" (")[0].strip() for row in rows] == [f"{ACTIVATION}@v1", f"{FA2}@v1", f"{FA2}@v1", RELU]
    assert all(f"has no build for {TORCH214}: nearest " in row for row in rows if FA2 not in row)
    assert sum(f"has no build for {CPU}" in row for row in rows) == 1  # flash-attn2 v1 has none for 2.13 either
    # each row names the builds nearest the target, each with one short clause, and a short fix
    [activation] = [row for row in rows if ACTIVATION in row]
    assert "nearest torch213-cxx11-cpu-x86_64-linux (Torch 2.13, not 2.14)" in activation
    assert activation.endswith("; no version branch has one")
    [fa2_here] = [row for row in rows if f"for {CPU}" in row]
    assert fa2_here.endswith(f"; {FA2}@v4 has torch213-cxx11-cpu-x86_64-linux for it")
    assert all(len(row) < 300 for row in rows), rows
    assert lines[-1] == "fix: pin the versions named above in their specs, or drop those targets"
    assert not (project / "kernels.lock").exists()

    as_json = cli("lock", "--json", cwd=project)
    assert as_json.exit_code == 1
    problems = json.loads(as_json.output)["error"]["problems"]
    assert [(p["kernel"], p["target"]) for p in problems] == [
        (f"{ACTIVATION}@v1", TORCH214), (f"{FA2}@v1", CPU), (f"{FA2}@v1", TORCH214), (RELU, TORCH214)]
    for problem in problems:  # the full list: every refused build with kernels' own reason
        assert problem["reasons"] and all(": " in reason for reason in problem["reasons"])
        assert problem["nearest"] and problem["fix"]
    assert any("Torch version (2.13) does not match environment Torch version (2.14)" in r
               for r in problems[0]["reasons"])

    # the fix the rows name, run: pin flash-attn2 as named, drop the target no version builds for
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace(f'"{FA2}@v1"', f'"{FA2}@v4"').replace(f', "{TORCH214}"', ""))
    assert cli("lock", cwd=project).exit_code == 0
