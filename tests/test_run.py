"""`kernlock run -- COMMAND`: the lock applies in the command and every Python process it starts."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from helpers import CUDA_X86
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub
from scripts.harness import FA2, kernlock_run, locked_project, only_locked_files_requested, run, variant_of


def test_trl_sft_cli_trains_through_the_locked_kernel(hub: TestHub, tmp_path: Path) -> None:
    from scripts import tiny

    project, lock = locked_project(tmp_path / "p", [FA2])
    [entry] = lock.kernels
    moved = advance_branch(hub.repo_path(FA2), entry.ref)
    tiny.tokenizer(project / "model")
    tiny.model("sdpa").save_pretrained(project / "model")
    (project / "data").mkdir()
    (project / "data" / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in tiny.texts()["text"]))
    hub.reset_counts()
    proc = run([
        sys.executable, "-m", "kernlock", "run", "--verbose", "--",
        "trl", "sft", "--model_name_or_path", "model", "--dataset_name", "data", "--attn_implementation", FA2,
        "--max_steps", "2", "--per_device_train_batch_size", "2", "--max_length", "32", "--output_dir", "out",
        "--report_to", "none", "--save_strategy", "no", "--logging_steps", "1", "--use_cpu", "--dtype", "float32",
    ], project, HF_DATASETS_OFFLINE="1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "Training completed" in proc.stdout + proc.stderr
    bound = f"kernlock: {FA2} (version 4) -> {entry.commit} [{variant_of(lock, entry)}]"
    assert bound in proc.stderr, proc.stderr[-5000:]
    assert f"applied for {lock.targets[0]} (strict)" in proc.stderr
    assert moved not in proc.stderr
    only_locked_files_requested(hub, lock)


CHILD = (
    "import subprocess\n"
    "code = 'import kernlock.patch as p; print(p.active_lock() is not None, p._STATE.strict)'\n"
    "child = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)\n"
    "import kernlock.patch as p\n"
    "tiny.result(here=[p.active_lock() is not None, p._STATE.strict], child=child.stdout.split())\n"
)


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_every_python_process_applies_the_lock(hub: TestHub, tmp_path: Path, lenient: bool) -> None:
    project, _ = locked_project(tmp_path / "p", [f"{FA2}@v2"])
    proc = kernlock_run(CHILD, project, *(["--lenient"] if lenient else []))
    assert proc.returncode == 0, proc.stderr
    strict = not lenient
    assert proc.result == {"here": [True, strict], "child": ["True", str(strict)]}


def test_exit_codes_and_signals_are_the_commands_own(hub: TestHub, tmp_path: Path) -> None:
    project, _ = locked_project(tmp_path / "p", [f"{FA2}@v2"])
    assert kernlock_run("raise SystemExit(3)", project).returncode == 3
    killed = kernlock_run("import signal; os.kill(os.getpid(), signal.SIGTERM)", project)
    assert killed.returncode == -signal.SIGTERM  # the command replaced kernlock: no wrapper turns it into 143
    missing = run([sys.executable, "-m", "kernlock", "run", "--", "no-such-program-kernlock"], project)
    assert missing.returncode == 127 and "command not found: no-such-program-kernlock" in missing.stderr


def test_no_variant_for_this_environment_stops_before_the_command_runs(hub: TestHub, tmp_path: Path) -> None:
    project, _ = locked_project(tmp_path / "p", [f"{FA2}@v2"], targets=[CUDA_X86])
    proc = kernlock_run("tiny.result(ran=True)", project)
    assert proc.returncode == 1 and proc.result is None
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: ") and "has no build variant for this environment" in line
    assert CUDA_X86 in line and "kernlock lock --target torch2.13-" in line
    # The start-up hook alone (as exported in a cluster job script) stops the process the same way.
    hooked = run([sys.executable, "-c", "print('ran')"], project, KERNLOCK_APPLY="1",
                 KERNLOCK_LOCKFILE=str(project / "kernels.lock"))
    assert hooked.returncode == 1 and "ran" not in hooked.stdout
    assert hooked.stderr.strip().splitlines() == [line]
