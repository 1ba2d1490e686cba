"""`kernlock run -- COMMAND`: the lock applies in the command and every Python process it starts."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from helpers import ACTIVATION, CUDA_X86, FA2, LockedProjectFactory, make_project
from kernlock._internal.cli.commands.run import run_environment
from kernlock._internal.compat.transformers import default_version
from kernlock._internal.host import current_target
from kernlock.testing.hub import TestHub
from scripts.harness import Completed, kernlock_run, run


def trl_sft(project: Path, attn_implementation: str, *run_options: str) -> Completed:
    """`kernlock run [run_options] -- trl sft` for two steps of a tiny model (written into `project` once)."""
    from scripts import tiny

    if not (project / "model").exists():
        tiny.tokenizer(project / "model")
        tiny.model("sdpa").save_pretrained(project / "model")
        (project / "data").mkdir()
        (project / "data" / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in tiny.texts()["text"]))
    return run([
        sys.executable, "-m", "kernlock", "run", *run_options, "--",
        "trl", "sft", "--model_name_or_path", "model", "--dataset_name", "data", "--attn_implementation", attn_implementation,
        "--max_steps", "2", "--per_device_train_batch_size", "2", "--max_length", "32", "--output_dir", "out",
        "--report_to", "none", "--save_strategy", "no", "--logging_steps", "1", "--use_cpu", "--dtype", "float32",
    ], project, HF_DATASETS_OFFLINE="1")


@pytest.mark.slow
def test_a_refusal_inside_trl_sft_is_one_line_first_naming_the_lenient_rerun(
    locked_project: LockedProjectFactory,
) -> None:
    project, _ = locked_project([f"{ACTIVATION}@v1"])
    refused = trl_sft(project, FA2)
    assert refused.returncode != 0
    lines = refused.stderr.splitlines()
    [error] = [line for line in lines if f"kernel {FA2}" in line]  # printed once, not once per wrapping library
    first = next(line for line in lines if "Traceback" in line or "error" in line.lower())
    assert "Traceback" not in refused.stderr  # nor accelerate's re-raise of its child's stderr
    version, _ = default_version(FA2, current_target())  # 4 for Transformers 5.25, 3 for 5.17 on torch 2.13
    assert first == error and error.startswith(f"kernlock: error: kernel {FA2} (version {version}) is not in ")
    assert f"lock it with `kernlock lock {FA2}@v{version}` (or rerun with `kernlock run --lenient -- …` (KERNLOCK_STRICT=0)" in error
    lenient = trl_sft(project, FA2, "--lenient")  # the escape hatch the line names, as printed
    assert lenient.returncode == 0, lenient.stderr[-3000:]
    assert "Training completed" in lenient.stdout + lenient.stderr


CHILD = (
    "import subprocess\n"
    "code = 'import kernels, kernlock._internal.runtime.apply as p; print(p.active_lock() is not None, p.state.binding().strict)'\n"
    "child = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)\n"
    "import kernels, kernlock._internal.runtime.apply as p\n"
    "tiny.result(here=[p.active_lock() is not None, p.state.binding().strict], child=child.stdout.split())\n"
)


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
@pytest.mark.slow
def test_every_python_process_applies_the_lock(locked_project: LockedProjectFactory, lenient: bool) -> None:
    project, _ = locked_project([f"{FA2}@v2"])
    proc = kernlock_run(CHILD, project, *(["--lenient"] if lenient else []))
    assert proc.returncode == 0, proc.stderr
    strict = not lenient
    assert proc.result == {"here": [True, strict], "child": ["True", str(strict)]}


@pytest.mark.slow
def test_exit_codes_and_signals_are_the_commands_own(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{FA2}@v2"])
    assert kernlock_run("raise SystemExit(3)", project).returncode == 3
    killed = kernlock_run("import signal; os.kill(os.getpid(), signal.SIGTERM)", project)
    assert killed.returncode == -signal.SIGTERM  # the command replaced kernlock: no wrapper turns it into 143
    missing = run([sys.executable, "-m", "kernlock", "run", "--", "no-such-program-kernlock"], project)
    assert missing.returncode == 127 and "command not found: no-such-program-kernlock" in missing.stderr


def test_no_variant_for_this_environment_stops_before_the_command_runs(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{FA2}@v2"], targets=[CUDA_X86])
    proc = kernlock_run("tiny.result(ran=True)", project)
    assert proc.returncode == 1 and proc.result is None
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: ") and "has no build variant for this environment" in line
    assert CUDA_X86 in line and "kernlock lock --target torch2.13-" in line
    # The start-up hook alone (as a cluster job script exports it) stops a process that imports
    # kernels or transformers the same way, before their code runs; other processes run untouched.
    hook = run_environment(project / "kernels.lock")
    hooked = run([sys.executable, "-c", "import transformers; print('ran')"], project, **hook)
    assert hooked.returncode == 1 and "ran" not in hooked.stdout
    assert hooked.stderr.strip().splitlines() == [line]
    plain = run([sys.executable, "-c", "import sys; print('kernlock._internal.runtime.apply' in sys.modules)"], project, **hook)
    assert plain.returncode == 0 and plain.stdout.split() == ["False"], plain.stderr


def test_job_script_exports_apply_the_lock_where_kernels_are_imported(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{FA2}@v2"])
    script = (
        f'eval "$({sys.executable} -m kernlock run --export)"\n'
        f'{sys.executable} -c "import sys; print(\'kernlock._internal.runtime.apply\' in sys.modules)"\n'
        f'{sys.executable} -c "import kernels, kernlock._internal.runtime.apply as p; print(p.active_lock() is not None)"\n'
    )
    proc = run(["bash", "-c", script], project)
    assert proc.returncode == 0 and proc.stdout.split() == ["False", "True"], proc.stderr


@pytest.mark.parametrize("value", ["1", "on", "YES"])
def test_every_true_kernlock_apply_applies_the_lock(locked_project: LockedProjectFactory, value: str) -> None:
    project, _ = locked_project([f"{FA2}@v2"])
    hook = {**run_environment(project / "kernels.lock"), "KERNLOCK_APPLY": value}  # `on` used to apply nothing
    proc = run([sys.executable, "-c", "import kernels, kernlock._internal.runtime.apply as p; print(p.active_lock() is not None)"],
               project, **hook)
    assert proc.returncode == 0 and proc.stdout.split() == ["True"], proc.stderr


def test_an_unknown_kernlock_apply_fails_closed_in_one_line(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([f"{FA2}@v2"])
    hook = {**run_environment(project / "kernels.lock"), "KERNLOCK_APPLY": "sure"}
    assert run([sys.executable, "-c", "pass"], project, **hook).returncode == 0  # only kernel imports stop
    proc = run([sys.executable, "-c", "import kernels"], project, **hook)
    [line] = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and line == ("kernlock: error: $KERNLOCK_APPLY='sure' is not one of 1/true/yes/on or "
                                             "0/false/no/off; fix: set it to e.g. 1 or unset it")
    off = run([sys.executable, "-c", "import kernels, kernlock._internal.runtime.apply as p; print(p.active_lock() is None)"],
              project, **{**hook, "KERNLOCK_APPLY": "off"})
    assert off.returncode == 0 and off.stdout.split() == ["True"], off.stderr


def test_apply_hook_without_a_lock_breaks_nothing_but_kernel_imports(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"])
    hook = {**run_environment(project / "kernels.lock"), "KERNLOCK_LOCKFILE": ""}
    assert run([sys.executable, "-c", "pass"], project, **hook).returncode == 0
    assert run([sys.executable, "-m", "pip", "--version"], project, **hook).returncode == 0
    imported = run([sys.executable, "-c", "import transformers"], project, **hook)
    assert imported.returncode == 1
    [line] = imported.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: no ") and "kernels.lock" in line and "run `kernlock lock`" in line
    locked = run([sys.executable, "-m", "kernlock", "lock"], project, **hook)  # the fix the error names works
    assert locked.returncode == 0, locked.stderr
    assert run([sys.executable, "-c", "import transformers"], project, **hook).returncode == 0


def test_run_never_borrows_the_lock_of_the_project_kernlock_is_installed_in(
        locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    installed_in, _ = locked_project([f"{FA2}@v2"], root=tmp_path / "team-proj")
    executable = installed_in / ".venv" / "bin" / "kernlock"
    executable.parent.mkdir(parents=True)
    executable.write_text(f"#!{sys.executable}\nimport sys\nfrom kernlock._internal.cli.main import main\nsys.exit(main())\n")
    executable.chmod(0o755)
    unlocked = make_project(tmp_path / "mine", kernels=[f"{FA2}@v2"])
    proc = run([str(executable), "run", "--", sys.executable, "-c", "print('ran')"], unlocked)
    assert proc.returncode == 1 and "ran" not in proc.stdout
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("kernlock: error: no lock file found") and str(installed_in) not in line
    assert str(unlocked / "kernels.lock") in line and "run `kernlock lock`" in line
    # The script the command runs (not kernlock's executable) may name the project.
    script = installed_in / "train.py"
    script.write_text("import os\nprint(os.environ['KERNLOCK_LOCKFILE'])\n")
    ran = run([str(executable), "run", "--", sys.executable, str(script)], unlocked)
    assert ran.returncode == 0 and ran.stdout.strip() == str(installed_in / "kernels.lock"), ran.stderr


def test_chaining_another_sitecustomize_imports_no_importlib_util(locked_project: LockedProjectFactory,
                                                                  tmp_path: Path) -> None:
    """Debian's Python has its own sitecustomize, which kernlock's chains to in every process: the chain runs it
    (once) without importing importlib.util and what it pulls in (contextlib, collections: ~3 ms a process)."""
    project, _ = locked_project([f"{FA2}@v2"])
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import sys\nsys.chained_runs = getattr(sys, 'chained_runs', 0) + 1\n")
    modules = "import sys; print(sys.chained_runs, ' '.join(sorted(sys.modules)))"
    plain = run([sys.executable, "-c", modules], project, PYTHONPATH=str(theirs))
    environment = run_environment(project / "kernels.lock")
    environment["PYTHONPATH"] = f"{environment['PYTHONPATH']}{os.pathsep}{theirs}"
    hooked = run([sys.executable, "-c", modules], project, **environment)
    assert plain.returncode == 0 and hooked.returncode == 0, plain.stderr + hooked.stderr
    assert plain.stdout.split()[0] == hooked.stdout.split()[0] == "1"  # theirs ran, once
    added = set(hooked.stdout.split()[1:]) - set(plain.stdout.split()[1:])
    assert not added & {"importlib.util", "contextlib", "collections", "functools"}, added


def test_the_start_up_hook_imports_almost_nothing_into_a_process_that_loads_no_kernel(
    locked_project: LockedProjectFactory,
) -> None:
    """Every Python process under `kernlock run` (pip, dataloader workers, shell helpers) pays the hook: it adds
    kernlock's settings and the import finder, and none of pathlib, re or kernlock.errors (~8 ms together)."""
    project, _ = locked_project([f"{FA2}@v2"])
    modules = "import sys; print(' '.join(sorted(sys.modules)))"
    plain = run([sys.executable, "-c", modules], project)
    hooked = run([sys.executable, "-c", modules], project, **run_environment(project / "kernels.lock"))
    assert plain.returncode == 0 and hooked.returncode == 0, plain.stderr + hooked.stderr
    added = set(hooked.stdout.split()) - set(plain.stdout.split())
    assert {"kernlock._internal.settings", "kernlock._internal.runtime.autoapply"} <= added, added
    assert not added & {"pathlib", "re", "fnmatch", "urllib.parse", "kernlock.errors", "kernlock._internal.runtime.apply"}, added
    assert added <= {"sitecustomize", "_kernlock_startup_chain", "kernlock", "kernlock._internal", "kernlock._internal.settings", "kernlock._internal.runtime", "__future__",
                     "kernlock._internal.runtime.autoapply", "math", "_posixsubprocess", "_thread"}, added
