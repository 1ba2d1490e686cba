"""`kernlock verify`: lock, fresh, coverage, cache and remote checks; exit codes; JSON; lean imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import ARM, CPU, CUDA_130, CUDA_X86, FA2, LockedProjectFactory, cli
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.verify.checks import verify
from kernlock.testing.fixtures import advance_branch
from kernlock.testing.hub import TestHub

ACT = "kernels-community/activation@v1"
SCAN = 'scan = ["train.py"]\n'
TRAIN = "from transformers import AutoModel\nmodel = AutoModel.from_pretrained('m', attn_implementation='{spec}')\n"


def train(spec: str) -> dict[str, str]:
    """A scanned train.py naming `spec`, for `locked_project(files=…)`."""
    return {"train.py": TRAIN.format(spec=spec)}


def verify_json(project: Path, *args: str) -> tuple[int, dict]:
    result = cli("verify", "--json", *args, cwd=project)
    return result.exit_code, json.loads(result.output)


def checks(report: dict) -> dict[str, dict]:
    return {check["name"]: check for check in report["checks"]}


def test_fresh_lock_passes_every_offline_check(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2", ACT], [CPU, CUDA_X86],
                             extra=SCAN, files=train("kernels-community/tagged@v1.0.0")).path
    result = cli("verify", "--all-targets", cwd=project)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("ok   lock (3 kernels, 2 targets)")
    assert lines[1] == "ok   fresh (3 specs)"
    assert lines[2].startswith("ok   coverage (") and CPU in lines[2] and CUDA_X86 in lines[2]
    # The current environment (torch 2.13 CPU here) by default.
    assert cli("verify", cwd=project).exit_code == 0
    report = verify(project)
    assert report.ok and report.exit_code == 0 and [c.name for c in report.checks] == ["lock", "fresh", "coverage", "doctor"]


def test_json_schema(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU, CUDA_X86]).path
    code, report = verify_json(project, "--target", ARM)
    assert code == 1
    assert set(report) == {"ok", "lockfile", "checks"} and report["ok"] is False
    assert report["lockfile"].endswith("kernels.lock")
    for check in report["checks"]:
        assert set(check) == {"name", "ok", "summary", "problems", "notes"}
        assert check["name"] in ("lock", "fresh", "coverage", "doctor", "cache", "remote")
        assert isinstance(check["ok"], bool) and isinstance(check["notes"], list)
        for problem in check["problems"]:
            assert isinstance(problem["message"], str) and isinstance(problem["fix"], str)
    coverage = checks(report)["coverage"]
    assert coverage["ok"] is False
    assert coverage["problems"][0]["target"] == ARM
    assert coverage["problems"][0]["fix"] == f"kernlock lock --target {ARM}"


def test_unreadable_lock_exits_2_naming_the_key_path(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU, CUDA_X86]).path
    lock_path = project / "kernels.lock"
    text = lock_path.read_text()
    lock_path.write_text(text.replace('commit = "', 'commit = "zz', 1))
    result = cli("verify", cwd=project)
    assert result.exit_code == 2
    assert result.output.startswith("FAIL lock: 1 problem")
    assert "kernel[0].commit" in result.output and result.output.count("fix: ") == 1  # the lock's own fix, once
    assert "fix: undo the hand edit, or re-resolve every pin with `kernlock lock --upgrade`" in result.output
    code, report = verify_json(project)
    assert code == 2 and [c["name"] for c in report["checks"]] == ["lock"]
    assert report["checks"][0]["problems"][0]["key_path"] == ["kernel", 0, "commit"]
    # Merge-conflict markers are named by line.
    lock_path.write_text(text + "<<<<<<< HEAD\n")
    result = cli("verify", cwd=project)
    assert result.exit_code == 2 and "kernels.lock:" in result.output and "merge-conflict" in result.output
    lock_path.unlink()
    result = cli("verify", cwd=project)
    assert result.exit_code == 2 and "no such lock file" in result.output


def test_bad_usage_exits_2(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU, CUDA_X86]).path
    result = cli("verify", "--target", "torch2-nonsense", cwd=project)
    assert result.exit_code == 2 and "invalid target" in result.output
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text() + "bogus = 1\n")
    result = cli("verify", cwd=project)
    assert result.exit_code == 2 and "unknown key" in result.output


def test_stale_when_sources_change(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2", ACT], [CPU, CUDA_X86],
                             extra=SCAN, files=train("kernels-community/universal@v1")).path
    pyproject = project / "pyproject.toml"
    # A kernel added in scanned code is named by file and line.
    (project / "train.py").write_text(TRAIN.format(spec="kernels-community/universal@v1")
                                      + "other = dict(attn_implementation='kernels-community/tagged@dev')\n")
    result = cli("verify", cwd=project)
    assert result.exit_code == 1
    assert "FAIL fresh: 1 problem" in result.output
    assert "train.py:3: kernels-community/tagged@dev is not in the lock" in result.output
    assert "fix: kernlock lock" in result.output
    assert "ok   coverage" in result.output  # the other checks still run
    # A changed pin in pyproject.toml is one "changed" problem; a removed spec is reported too.
    (project / "train.py").write_text(TRAIN.format(spec="kernels-community/universal@v1"))
    pyproject.write_text(pyproject.read_text().replace(f'"{FA2}@v2"', f'"{FA2}@v3"').replace(f', "{ACT}"', ""))
    code, report = verify_json(project)
    assert code == 1
    fresh = checks(report)["fresh"]
    messages = [p["message"] for p in fresh["problems"]]
    assert len(messages) == 2, messages
    assert any(f"the lock has {FA2}@v2, the sources ask for {FA2}@v3" in m for m in messages)
    assert any(m.startswith("pyproject.toml:") for m in messages)
    assert any(f"{ACT} is locked but no longer named" in m for m in messages)
    changed = next(p for p in fresh["problems"] if "was" in p)
    assert changed["file"] == "pyproject.toml" and isinstance(changed["line"], int)
    # Re-locking makes it fresh again.
    assert cli("lock", cwd=project).exit_code == 0
    assert cli("verify", cwd=project).exit_code == 0


def test_stale_when_a_declared_target_is_not_locked(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CPU]).path
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'targets = ["{CPU}"]', f'targets = ["{CPU}", "{CUDA_130}"]'))
    result = cli("verify", cwd=project)
    assert result.exit_code == 1
    assert f"target {CUDA_130} is declared in [tool.kernlock] targets but not locked" in result.output
    result = cli("verify", "--all-targets", cwd=project)
    assert f"target {CUDA_130} is not covered by the lock" in result.output
    assert f"fix: kernlock lock --target {CUDA_130}" in result.output


def test_aliases_and_dependency_tables_count_as_sources(locked_project: LockedProjectFactory) -> None:
    project = locked_project(["flash_attention_2"], [CPU, CUDA_X86],
                             extra='\n[tool.kernels.dependencies]\n"kernels-community/activation" = 1\n').path
    result = cli("verify", cwd=project)
    assert result.exit_code == 0, result.output
    assert "ok   fresh (2 specs)" in result.output


def test_coverage_of_current_and_named_targets(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], [CUDA_X86]).path
    # The running environment (CPU) is not locked.
    result = cli("verify", cwd=project)
    assert result.exit_code == 1
    assert f"FAIL coverage: 1 problem ({CPU})" in result.output
    assert f"fix: kernlock lock --target {CPU}" in result.output
    assert cli("verify", "--target", CUDA_X86, cwd=project).exit_code == 0
    result = cli("verify", "--target", CUDA_X86, "--target", ARM, cwd=project)
    assert result.exit_code == 1 and ARM in result.output and "ok   fresh" in result.output
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0


def test_coverage_names_a_kernel_missing_a_variant(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2", ACT], [CPU, CUDA_X86]).path
    lock_path = project / "kernels.lock"
    text = lock_path.read_text()
    # Drop the CPU target from one kernel's variants (as an older kernlock or a hand edit might).
    lock = load_lockfile(lock_path)
    kernel = lock.kernel(ACT)
    variant = kernel.variant_for(CPU)
    assert f'name = "{variant.name}"\ntargets = ["{CPU}"]' in text
    lock_path.write_text(text.replace(f'name = "{variant.name}"\ntargets = ["{CPU}"]', f'name = "{variant.name}"\ntargets = []', 1))
    code, report = verify_json(project, "--all-targets")
    assert code == 1
    problems = checks(report)["coverage"]["problems"]
    assert [(p["kernel"], p["target"]) for p in problems] == [(ACT, CPU)]
    assert problems[0]["fix"] == f"kernlock lock --target {CPU}"


def test_cache_check(locked_project: LockedProjectFactory) -> None:
    from kernlock._internal.fetch.download import ensure_variant
    from kernlock._internal.store.hub_cache import variant_dir

    project = locked_project([ACT], [CPU]).path
    result = cli("verify", "--cache", cwd=project)
    assert result.exit_code == 1
    assert "FAIL cache" in result.output and "are not in the cache" in result.output
    assert "fix: kernlock sync\n" in result.output + "\n"
    kernel = load_lockfile(project / "kernels.lock").kernel(ACT)
    variant = kernel.variant_for(CPU)
    root = ensure_variant(kernel, variant)
    assert root == variant_dir(kernel, variant.name)
    result = cli("verify", "--cache", cwd=project)
    assert result.exit_code == 0, result.output
    assert "ok   cache (1 variant in" in result.output
    victim = root / variant.files[0].path
    victim.write_bytes(b"tampered" + victim.read_bytes())
    code, report = verify_json(project, "--cache")
    assert code == 1
    problem = checks(report)["cache"]["problems"][0]
    assert problem["fix"].startswith("run `kernlock sync --repair` to restore it") and problem["kernel"] == ACT
    assert "does not match kernels.lock" in problem["message"]


def test_cache_check_reports_every_problem_of_a_variant(locked_project: LockedProjectFactory) -> None:
    """A tampered file, a missing one and a planted one in one variant: three problems, each with a fix that works."""
    from kernlock._internal.fetch.download import ensure_variant

    project = locked_project([ACT], [CPU]).path
    kernel = load_lockfile(project / "kernels.lock").kernel(ACT)
    variant = kernel.variant_for(CPU)
    assert len(variant.files) >= 2
    root = ensure_variant(kernel, variant)
    tampered, gone = (root / f.path for f in variant.files[:2])
    tampered.write_bytes(b"tampered" + tampered.read_bytes())
    gone.unlink()
    (root / "planted.py").write_text("print('not locked')\n")
    code, report = verify_json(project, "--cache")
    assert code == 1
    problems = checks(report)["cache"]["problems"]
    messages = [p["message"] for p in problems]
    assert len(problems) == 3, messages
    assert f"1 of {len(variant.files)} file(s) of {variant.name} are not in the cache ({variant.files[1].path})" in messages[0]
    assert "planted.py" in messages[1] and "does not list" in messages[1]
    assert f"{variant.name}/{variant.files[0].path} does not match kernels.lock" in messages[2]
    assert problems[0]["fix"] == "kernlock sync --repair"  # the files missing: verify's own finding
    assert problems[2]["fix"].startswith("run `kernlock sync --repair` to restore it, or `kernlock lock -P ")
    assert f"`kernlock lock -P {ACT.split('@')[0]}`" in problems[1]["fix"]  # an unlisted file may be the lock's loss
    repaired = cli("sync", "--repair", cwd=project)  # the fix, as printed: restores the locked files, deletes nothing
    assert repaired.exit_code == 1 and "(planted.py), which commit" in repaired.output
    assert (root / "planted.py").is_file()
    (root / "planted.py").unlink()  # what its fix says (`rm -r -- …/planted.py`)
    repaired = cli("verify", "--cache", cwd=project)
    assert repaired.exit_code == 0, repaired.output
    assert repaired.output.startswith("ok   lock (1 kernel, 1 target)")  # plurals
    assert "ok   fresh (1 spec)" in repaired.output and "ok   cache (1 variant in" in repaired.output


def test_remote_check(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v4", "kernels-community/tagged@v1.0.0"], [CPU]).path
    result = cli("verify", "--remote", cwd=project)
    assert result.exit_code == 0, result.output
    assert "ok   remote (2 repos)" in result.output
    # A moved branch is a note, not a failure.
    advance_branch(hub.repo_path(FA2), "v4")
    code, report = verify_json(project, "--remote")
    assert code == 0
    notes = checks(report)["remote"]["notes"]
    assert len(notes) == 1 and f"{FA2}@v4: branch v4 moved from" in notes[0] and f"kernlock lock -P {FA2}" in notes[0]
    # A locked commit that is gone from the Hub fails.
    lock_path = project / "kernels.lock"
    commit = load_lockfile(lock_path).kernel(f"{FA2}@v4").commit
    lock_path.write_text(lock_path.read_text().replace(commit, "0" * 40))
    code, report = verify_json(project, "--remote")
    assert code == 1
    problem = checks(report)["remote"]["problems"][0]
    assert "is gone from the Hub" in problem["message"] and problem["fix"] == f"kernlock lock -P {FA2}"


def _imports_of(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = {k: v for k, v in os.environ.items() if k != "KERNLOCK_APPLY"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "kernlock", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return proc, modules


def test_plain_verify_imports_nothing_heavy(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2", "flash_attention_2"], [CPU, CUDA_X86],
                             extra=SCAN, files=train("kernels-community/tagged@v1")).path
    for args in (["verify"], ["verify", "--all-targets", "--json"]):
        proc, modules = _imports_of(args, project)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "kernlock._internal.verify.checks" in modules
        heavy = {m for m in modules if m.split(".")[0] in ("torch", "transformers", "kernels", "huggingface_hub", "sigstore")}
        assert not heavy, sorted(heavy)
