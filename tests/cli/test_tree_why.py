"""`kernlock tree` and `kernlock why` (issue 48): every lock entry traced to what brought it in, per target, with
no Hub request."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from helpers import (
    ACTIVATION,
    CPU,
    CU128_ON_V2,
    CUDA_X86,
    FA2,
    WITH_DEP,
    cli,
    make_project,
    quick_start_blocks,
    run_bash,
    tiny_model_and_data,
)
from kernlock.testing.hub import TestHub

ROTARY = "kernels-community/rotary"


def _quick_start_project(tmp_path: Path) -> Path:
    """The README's quick-start project, locked by its lock block as written."""
    lock_block = quick_start_blocks("bash")[0]
    project = tmp_path / "my-training-project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "my-training-project"\nversion = "0"\n')
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    tiny_model_and_data(project)
    locked = run_bash(lock_block, tmp_path)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    return project


@pytest.mark.slow
def test_why_rotary_names_the_model_and_the_transformers_row_and_tree_gives_every_entry_a_source(
    hub: TestHub, tmp_path: Path
) -> None:
    project = _quick_start_project(tmp_path)
    models_line = next(n for n, line in enumerate((project / "pyproject.toml").read_text().splitlines(), 1)
                       if line.startswith("models = "))
    hub.reset_counts()

    why = cli("why", ROTARY, cwd=project)

    assert why.exit_code == 0, why.output
    lines = why.output.splitlines()
    assert lines[0].startswith(f"{ROTARY}@v2  v2 -> ")
    assert lines[1] == "  targets: torch2.9-cxx11-cu128-x86_64-linux"
    assert lines[2] == (f"  <- model: pyproject.toml:{models_line}: ./model (LlamaForCausalLM), layer rotary_pos_emb; "
                        "Transformers 5.25.0's kernelize mapping: rotary_pos_emb -> kernels-community/rotary@v2 "
                        "(cuda: inference, training)")

    tree = cli("tree", "--json", cwd=project)
    assert tree.exit_code == 0, tree.output
    data = json.loads(tree.output)
    assert {k["spec"] for k in data["kernels"]} == {f"{ROTARY}@v2", FA2, "kernels-community/liger-kernels@v4",
                                                     f"{ACTIVATION}@v1"}
    assert all(k["sources"] for k in data["kernels"])
    [fa2] = [k for k in data["kernels"] if k["spec"] == FA2]
    assert fa2["sources"] == [{"kind": "pyproject", "text": f'"{FA2}"', "where": "pyproject.toml:6"}]
    assert sorted(fa2["targets"]) == sorted(data["targets"])
    assert sum(hub.requests.values()) == 0  # read from the project and the lock alone


def test_tree_shows_scan_findings_overrides_and_kernel_depends_per_target(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{WITH_DEP}@v1"], targets=[CPU, CUDA_X86],
                           extra='scan = ["train.py"]\n' + CU128_ON_V2)
    (project / "train.py").write_text(f'import transformers\n\nmodel = load(attn_implementation="{FA2}")\n')
    assert cli("lock", cwd=project).exit_code == 0
    hub.reset_counts()

    result = cli("tree", cwd=project)

    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith(f"{CUDA_X86}\n")  # targets in the order of their text, as the lock lists them
    cuda, cpu = text.split(f"{CPU}\n")
    assert f'<- scan: train.py:3: {FA2}' in cpu
    assert f"<- kernel-depends: a dependency of {WITH_DEP}@v1" in cpu
    # on CUDA 12.8 flash-attn2 comes from its override
    assert (f'{FA2} [backend=cu128]  v2 -> ' in cuda and
            f'<- override: [tool.kernlock.overrides."{FA2}"] backend=cu128 -> v2 '
            "(v3+ fails in the GQA backward pass on CUDA 12.8)" in cuda)
    assert f'<- pyproject: pyproject.toml:6: "{WITH_DEP}@v1"' in cuda
    only_cpu = cli("tree", "--target", CPU, cwd=project)
    assert only_cpu.exit_code == 0 and only_cpu.output == f"{CPU}\n{cpu}", only_cpu.output
    why = cli("why", ACTIVATION, "--json", cwd=project)
    assert why.exit_code == 0, why.output
    [activation] = json.loads(why.output)
    assert activation["sources"] == [{"kind": "kernel-depends", "text": f"a dependency of {WITH_DEP}@v1",
                                      "where": None}]
    assert sum(hub.requests.values()) == 0


def test_why_an_unknown_repo_is_one_line_with_a_did_you_mean_whose_fix_works(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0

    result = cli("why", "kernels-community/activaton", cwd=project)

    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line == (f"kernlock: error: kernels-community/activaton is not in the lock (did you mean {ACTIVATION}?); "
                    f"locked: {ACTIVATION}@v1; fix: `kernlock why {ACTIVATION}`")
    fixed = cli(*shlex.split(line.split("`")[1])[1:], cwd=project)
    assert fixed.exit_code == 0 and fixed.output.startswith(f"{ACTIVATION}@v1  v1 -> "), fixed.output
