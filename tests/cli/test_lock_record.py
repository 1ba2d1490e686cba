"""`kernlock lock --record -- CMD`: run CMD once, recording every kernel it loads, and lock those too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import ACTIVATION, REPO_ROOT, UNIVERSAL, make_project, markdown_blocks
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.project.config import load_project
from kernlock._internal.runtime.recorder import read_requests
from kernlock.testing.hub import TestHub
from scripts.harness import CLIENT_CHATTER, run

TRAIN = (
    "import torch\n"
    "from kernels import get_kernel\n"
    f"k = get_kernel({UNIVERSAL!r}, version=1)\n"
    "print('sum', k.add(torch.ones(2), torch.ones(2)).tolist())\n"
)


def kernlock(project: Path, *args: str, **env: str):
    return run([sys.executable, "-m", "kernlock", *args], project, **env)


@pytest.mark.slow
def test_a_kernel_only_the_run_loads_is_locked_as_recorded_and_then_loads_locked_offline(
    hub: TestHub, tmp_path: Path
) -> None:
    project = make_project(tmp_path / "p")
    (project / "train.py").write_text(TRAIN)
    recorded = kernlock(project, "lock", "--record", "--", sys.executable, "train.py")
    assert recorded.returncode == 0, recorded.stderr
    assert "sum [2.0, 2.0]" in recorded.stderr  # the command's own output, on kernlock's stderr
    lock = load_lockfile(project / "kernels.lock")
    [entry] = lock.kernels
    assert entry.spec == f"{UNIVERSAL}@v1" and entry.source == "recorded"
    assert lock.version == "1.4" and lock.inputs == (f"{UNIVERSAL}@v1",)
    assert 'source = "recorded"' in (project / "kernels.lock").read_text()
    assert load_project(project).recorded == (f"{UNIVERSAL}@v1",)
    assert kernlock(project, "verify").returncode == 0
    assert f"{UNIVERSAL}@v1 (recorded)" in kernlock(project, "show").stdout

    # a plain re-lock keeps it (freshness reads [tool.kernlock] recorded), byte for byte
    before = (project / "kernels.lock").read_bytes()
    relock = kernlock(project, "lock", "--check")
    assert relock.returncode == 0, relock.stderr
    assert (project / "kernels.lock").read_bytes() == before

    hub.reset_counts()
    ran = kernlock(project, "run", "--", sys.executable, "train.py", HF_HUB_OFFLINE="1")
    assert ran.returncode == 0, ran.stderr
    assert "sum [2.0, 2.0]" in ran.stdout
    assert [path for _, path in hub.log if not path.startswith(CLIENT_CHATTER)] == []

    removed = kernlock(project, "remove", f"{UNIVERSAL}@v1")  # a recorded spec is removed like a declared one
    assert removed.returncode == 0, removed.stderr
    assert load_project(project).recorded == () and "recorded" not in (project / "pyproject.toml").read_text()
    assert load_lockfile(project / "kernels.lock").kernels == ()


@pytest.mark.slow
def test_a_failing_command_writes_nothing(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"])
    (project / "train.py").write_text(TRAIN + "raise SystemExit(3)\n")
    pyproject = (project / "pyproject.toml").read_bytes()
    failed = kernlock(project, "lock", "--record", "--", sys.executable, "train.py")
    assert failed.returncode != 0
    [line] = [line for line in failed.stderr.splitlines() if line.startswith("kernlock:")]
    assert line.startswith("kernlock: error: the recorded command ") and "exited with status 3" in line
    assert not (project / "kernels.lock").exists()
    assert (project / "pyproject.toml").read_bytes() == pyproject


def test_a_command_that_loads_nothing_locks_as_usual(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{ACTIVATION}@v1"])
    pyproject = (project / "pyproject.toml").read_bytes()
    locked = kernlock(project, "lock", "--record", "--", sys.executable, "-c", "import kernels")
    assert locked.returncode == 0, locked.stderr
    [entry] = load_lockfile(project / "kernels.lock").kernels
    assert entry.spec == f"{ACTIVATION}@v1" and entry.source is None
    assert (project / "pyproject.toml").read_bytes() == pyproject  # no `recorded` key
    assert 'version = "1.0"' in (project / "kernels.lock").read_text()


@pytest.mark.slow
def test_layer_loads_under_kernelize_record_the_layer_device_and_mode(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    (project / "train.py").write_text(
        "import torch\n"
        "from kernels import FuncRepository, LayerRepository, Mode, kernelize, use_kernel_mapping\n"
        "from kernels import use_kernel_forward_from_hub\n"
        "@use_kernel_forward_from_hub('SiluAndMul')\n"
        "class SiluAndMul(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x\n"
        f"mapping = {{'SiluAndMul': {{'cpu': LayerRepository({ACTIVATION!r}, layer_name='SiluAndMul', version=1)}}}}\n"
        "with use_kernel_mapping(mapping):\n"
        "    kernelize(torch.nn.Sequential(SiluAndMul()), mode=Mode.INFERENCE, device='cpu', use_fallback=True)\n"
        f"FuncRepository({UNIVERSAL!r}, func_name='add', version=1).load()\n"
    )
    recording = tmp_path / "requests.jsonl"
    from kernlock._internal.cli.commands.run import run_environment

    environment = run_environment(project / "kernels.lock")
    proc = run([sys.executable, "train.py"], project, PYTHONPATH=environment["PYTHONPATH"], KERNLOCK_RECORD=str(recording))
    assert proc.returncode == 0, proc.stderr
    requests, warnings = read_requests(recording)
    assert warnings == []
    assert [(r.via, r.spec, r.layer, r.device, r.mode) for r in requests] == [
        ("LayerRepository.load", f"{ACTIVATION}@v1", "SiluAndMul", "cpu", "inference"),
        ("FuncRepository.load", f"{UNIVERSAL}@v1", "add", None, None),
    ], [json.loads(line) for line in recording.read_text().splitlines()]


@pytest.mark.slow
def test_the_cli_references_record_block_runs_as_written(hub: TestHub, tmp_path: Path) -> None:
    page = (REPO_ROOT / "docs/reference/cli.md").read_text(encoding="utf-8")
    section = page.split("## Recording what a command loads", 1)[1].split("\n## ", 1)[0]
    [block] = markdown_blocks(section, "bash")
    project = make_project(tmp_path / "p")
    (project / "train.py").write_text(TRAIN)  # takes --max_steps 1 and ignores it
    ran = run(["bash", "-euc", block], project)
    assert ran.returncode == 0, ran.stderr
    [entry] = load_lockfile(project / "kernels.lock").kernels
    assert entry.spec == f"{UNIVERSAL}@v1" and entry.source == "recorded"
