"""Advice that can be run blindly: each refusal's printed fix, run as printed, changes only what it names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, FA2, LockedProjectFactory, run_kernlock
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub

TRAIN = "import kernlock\nkernlock.apply()\n"


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under `root` (relative path -> bytes), kernlock's project mutex left out."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".kernlock.mutex"}


def error_line(result: subprocess.CompletedProcess, where: str = "stderr") -> str:
    """The one `kernlock: error:` line of a command that exited 2 (nothing else printed)."""
    output = getattr(result, where)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernlock: error: "), output
    return lines[0]


def fix_commands(text: str) -> list[str]:
    """The commands a printed fix names (its back-quoted spans after `fix:`)."""
    fix = text.split("fix: ", 1)[1]
    return re.findall(r"`([^`]+)`", fix)


def run_fix(command: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a printed fix as printed, through the shell, with this interpreter's `kernlock` first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {}), "PATH": path})


# ---------------------------------------------------------------- 1. a lock path naming a project file


@pytest.mark.parametrize("named", ["env", "option"])
def test_a_lock_path_naming_a_project_file_is_refused_and_its_fix_writes_only_the_lock(
    locked_project: LockedProjectFactory, named: str,
) -> None:
    project = locked_project([FA2], [CPU], files={"train.py": TRAIN}).path
    victim = "pyproject.toml" if named == "env" else "train.py"
    env = {"KERNLOCK_LOCKFILE": victim} if named == "env" else {}
    option = ["--lockfile", victim] if named == "option" else []
    before = snapshot(project)

    verified = run_kernlock("verify", *option, cwd=project, env=env)
    assert verified.returncode == 2
    assert victim in verified.stdout and "it is not a kernlock lock" in verified.stdout or \
        f"{victim} is not a kernlock lock" in verified.stdout
    assert "kernlock lock --upgrade" not in verified.stdout  # the fix that wrote the lock over the project file

    refused = error_line(run_kernlock("lock", "--upgrade", *option, cwd=project, env=env))
    assert f"refusing to write the lock over {victim}" in refused and "nothing was written" in refused
    assert snapshot(project) == before

    [fix] = fix_commands(refused)
    assert fix == ("env -u KERNLOCK_LOCKFILE kernlock lock --upgrade" if named == "env" else "kernlock lock --upgrade")
    fixed = run_fix(fix, project, env)
    assert fixed.returncode == 0, fixed.stderr
    after = snapshot(project)
    assert {name for name in after if after[name] != before.get(name)} <= {"kernels.lock"}  # only the lock it names
    assert after.keys() == before.keys()
    assert load_lockfile(project / "kernels.lock").kernels[0].repo == FA2


def test_a_configured_lock_path_naming_a_project_file_is_refused(hub: TestHub, tmp_path: Path) -> None:
    from helpers import make_project

    project = make_project(tmp_path / "p", kernels=[FA2], targets=[CPU], extra='lockfile = "train.py"\n')
    (project / "train.py").write_text(TRAIN)
    before = snapshot(project)
    verified = run_kernlock("verify", cwd=project)
    assert verified.returncode == 2 and "it is not a kernlock lock" in verified.stdout
    assert "kernlock lock" not in verified.stdout.split("fix: ", 1)[1]
    for args in (("lock",), ("lock", "--upgrade")):
        refused = error_line(run_kernlock(*args, cwd=project))
        assert "named by [tool.kernlock] lockfile of pyproject.toml" in refused
        assert refused.endswith(f'fix: set [tool.kernlock] lockfile in {project / "pyproject.toml"} to a new file '
                                'such as "kernels.lock"')
        assert snapshot(project) == before
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('lockfile = "train.py"', 'lockfile = "kernels.lock"'))  # the fix
    assert run_kernlock("lock", cwd=project).returncode == 0
    assert (project / "train.py").read_text() == TRAIN and load_lockfile(project / "kernels.lock").kernels[0].repo == FA2


def test_a_default_lock_path_holding_another_file_is_moved_away_by_the_fix(locked_project: LockedProjectFactory) -> None:
    project = locked_project([FA2], [CPU]).path
    (project / "kernels.lock").write_text("notes about kernels\n")
    before = snapshot(project)
    refused = error_line(run_kernlock("lock", "-U", cwd=project))
    assert "refusing to write the lock over" in refused and snapshot(project) == before
    move, rerun = fix_commands(refused)
    assert rerun == "kernlock lock --upgrade"
    assert run_fix(move, project).returncode == 0 and run_fix(rerun, project).returncode == 0
    assert (project / "kernels.lock.bak").read_bytes() == before["kernels.lock"]  # nothing lost
    assert load_lockfile(project / "kernels.lock").kernels[0].repo == FA2


def test_a_named_lock_in_a_missing_directory_creates_no_directory(locked_project: LockedProjectFactory,
                                                                   tmp_path: Path) -> None:
    project = locked_project([FA2], [CPU]).path
    named = tmp_path / "missing" / "sub" / "kernels.lock"
    before = snapshot(project)
    refused = error_line(run_kernlock("lock", cwd=project, env={"KERNLOCK_LOCKFILE": str(named)}))
    assert "does not exist" in refused and not (tmp_path / "missing").exists()
    assert snapshot(project) == before
    mkdir, rerun = fix_commands(refused)
    assert mkdir == f"mkdir -p {named.parent}" and rerun == "env -u KERNLOCK_LOCKFILE kernlock lock"
    assert run_fix(mkdir, project).returncode == 0
    created = run_kernlock("lock", cwd=project, env={"KERNLOCK_LOCKFILE": str(named)})
    assert created.returncode == 0, created.stderr
    assert load_lockfile(named).kernels[0].repo == FA2 and snapshot(project) == before


def test_the_lock_command_refuses_a_project_file_in_process(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    import kernlock
    from kernlock.errors import UsageError

    project = locked_project([FA2], [CPU]).path
    before = snapshot(project)
    for call in (lambda: kernlock.lock(project, upgrade=True, lockfile=project / "pyproject.toml"),
                 lambda: kernlock.lock(project, upgrade=True, write=False, lockfile=project / "pyproject.toml")):
        with pytest.raises(UsageError) as refused:
            call()
        assert refused.value.exit_code == 2 and refused.value.fix
    assert snapshot(project) == before


# ---------------------------------------------------------------- 2. sync --repair deletes nothing from the shared cache


ACT = "kernels-community/activation"


def cache_files(cache: Path) -> dict[str, bytes]:
    """Every file of the kernel repos' blobs and snapshots in the Hub cache (through the snapshot links); what the
    clients record beside them (`.locks/`, kernels' `.verified-kernels/`, huggingface_hub's `trees/`) left out."""
    return {name: data for name, data in snapshot(cache).items()
            if name.startswith("kernels--") and name.split("/")[1] in ("blobs", "snapshots")}


Synced = tuple[Path, LockedKernel, Path, Path]  # project, its one entry, the variant's cache directory, the cache


@pytest.fixture
def synced(locked_project: LockedProjectFactory) -> Synced:
    """A project locking activation@v1 for this machine, synced into the Hub cache."""
    from kernlock._internal.store.hub_cache import hub_cache_dir, variant_dir

    project, lock = locked_project([f"{ACT}@v1"], [CPU])
    assert run_kernlock("sync", cwd=project).returncode == 0
    [entry] = lock.kernels
    return project, entry, variant_dir(entry, entry.variant_for(CPU).name), hub_cache_dir()


@pytest.mark.slow
def test_a_file_the_lock_lost_stays_in_the_shared_cache_and_the_printed_fix_restores_the_lock(synced: Synced) -> None:
    import kernels

    import kernlock
    from kernlock._internal.runtime.apply import release
    from kernlock.errors import IntegrityError
    from scripts.harness import python

    project, entry, root, cache = synced
    variant = entry.variant_for(CPU)
    lost = next(f for f in variant.files if f.path.endswith("layers.py"))
    path, genuine = project / "kernels.lock", (project / "kernels.lock").read_text()
    path.write_text("".join(line for line in genuine.splitlines(keepends=True) if f'path = "{lost.path}"' not in line))
    before, project_before = cache_files(cache), snapshot(project)

    kernlock.apply(path)
    try:
        with pytest.raises(IntegrityError) as refused:
            kernels.get_kernel(ACT, version=1)
    finally:
        release()
    assert lost.path in refused.value.message and refused.value.fix
    assert fix_commands(str(refused.value))[0] == f"kernlock lock -P {ACT}"  # not `sync --repair`

    repaired = run_kernlock("sync", "--repair", cwd=project)
    line = error_line(repaired) if repaired.returncode == 2 else repaired.stderr.strip()
    assert repaired.returncode == 1 and len(line.splitlines()) == 1 and line.startswith("kernlock: error: "), line
    assert f"which commit {entry.commit[:12]} holds on the Hub" in line and "stay in the shared cache" in line
    assert cache_files(cache) == before and (root / lost.path).is_file()
    plain = python(f"import kernels; kernels.get_kernel({ACT!r}, revision={entry.commit!r})", project)
    assert plain.returncode == 0, plain.stderr  # plain kernels still loads the commit from the shared cache

    [fix] = fix_commands(line)
    assert fix == f"kernlock lock -P {ACT}"
    assert run_fix(fix, project).returncode == 0
    assert path.read_text() == genuine  # the lock's entry is back, nothing else changed
    assert {n for n, data in snapshot(project).items() if data != project_before.get(n)} == {"kernels.lock"}
    assert cache_files(cache) == before
    assert run_kernlock("verify", "--cache", cwd=project).returncode == 0


@pytest.mark.slow
def test_a_planted_file_is_reported_not_deleted_and_the_printed_fix_deletes_only_it(synced: Synced) -> None:
    project, _, root, cache = synced
    before = cache_files(cache)
    planted = root / "activation" / "planted.py"
    planted.write_text("print('not locked')\n")

    verified = run_kernlock("verify", "--cache", cwd=project)
    assert verified.returncode == 1 and "planted.py" in verified.stdout and "sync --repair" not in \
        verified.stdout.split("fix: ", 1)[1].split("`")[1]
    repaired = run_kernlock("sync", "--repair", cwd=project)
    line = repaired.stderr.strip()
    assert repaired.returncode == 1 and len(line.splitlines()) == 1, line
    assert "does not hold on the Hub" in line and planted.is_file()
    [fix] = fix_commands(line)
    assert fix == f"rm -r -- {planted}"
    assert run_fix(fix, project).returncode == 0
    assert cache_files(cache) == before  # exactly the planted file went
    assert run_kernlock("sync", "--repair", cwd=project).returncode == 0


# ---------------------------------------------------------------- 3. version=N is never served another version


def test_a_version_the_bare_spec_is_not_pinned_at_is_refused_and_the_printed_fix_locks_it(
    hub: TestHub, locked_project: LockedProjectFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    import kernels

    import kernlock
    from kernlock._internal.compat import transformers
    from kernlock._internal.runtime.apply import release
    from kernlock.errors import UnlockedKernelError

    project, lock = locked_project([FA2], [CPU])
    [bare] = lock.kernels
    default = bare.version  # what this Transformers asks for a bare flash-attn2 here (4 on torch >= 2.10)
    assert default is not None and default != 2
    before = snapshot(project)
    kernlock.apply(project / "kernels.lock")
    try:
        hub.reset_counts()
        for version in (0, 2):  # code asking for another version (Transformers' MiniMaxAI/msa loader asks for 0)
            with pytest.raises(UnlockedKernelError, match=rf"kernel {FA2} \(version {version}\) is not in") as refused:
                kernels.get_kernel(FA2, version=version)
        assert sum(hub.requests.values()) == 0, hub.log
        assert kernels.get_kernel(FA2, version=default).KERNEL_IDENTITY["commit"] == bare.commit
        # Transformers' default moved (another release): the bare spec's pin still serves it, with the drift note.
        with monkeypatch.context() as patched, caplog.at_level(logging.WARNING, logger="kernlock"):
            patched.setattr(transformers, "default_version", lambda repo, target: (3, "a later release"))
            assert kernels.get_kernel(FA2, version=3).KERNEL_IDENTITY["commit"] == bare.commit
        assert f"the lock pins the bare spec at version {default}" in caplog.text
    finally:
        release()

    [fix] = re.findall(r"`(kernlock lock [^`]+)`", str(refused.value))
    assert fix == f"kernlock lock {FA2}@v2"
    assert run_fix(fix, project).returncode == 0
    after = snapshot(project)
    assert {name for name in after if after[name] != before[name]} == {"pyproject.toml", "kernels.lock"}
    relocked = load_lockfile(project / "kernels.lock")
    assert relocked.kernel(FA2).commit == bare.commit  # the bare spec's pin is kept
    kernlock.apply(project / "kernels.lock")
    try:
        assert kernels.get_kernel(FA2, version=2).KERNEL_IDENTITY["commit"] == relocked.kernel(f"{FA2}@v2").commit
    finally:
        release()


# ---------------------------------------------------------------- 4. export: one pin per kernel, the spec's own


def test_export_with_a_per_target_override_writes_the_specs_own_pin_and_names_the_override(
    hub: TestHub, locked_project: LockedProjectFactory, tmp_path: Path,
) -> None:
    import json

    import kernels

    from helpers import CU128_ON_V2, CUDA_X86

    project, lock = locked_project([FA2], [CPU, CUDA_X86], extra=CU128_ON_V2)
    own = lock.kernel(FA2)
    [override] = [k for k in lock.kernels if k.override is not None]
    assert own.override is None and override.commit != own.commit
    before = snapshot(project)
    out = tmp_path / "kernels-lock.json"
    exported = run_kernlock("export", "--format", "kernels", "-o", str(out), cwd=project)
    assert exported.returncode == 0, exported.stderr
    warning, wrote = exported.stderr.strip().splitlines()
    assert warning.startswith(f"kernlock: warning: {FA2}: the override for backend=cu128 (v2, {override.commit[:12]}; "
                              f"{CUDA_X86}) is not written") and wrote == f"wrote {out} (1 kernels, kernels format)"
    data = json.loads(out.read_text())
    assert [(e["dependency"]["repo-id"], e["lock"]["commit"]) for e in data] == [(FA2, own.commit)]
    assert snapshot(project) == before
    identity = kernels.get_locked_kernel(FA2, lockfile=out).KERNEL_IDENTITY  # plain kernels, on this CPU machine
    assert identity["commit"] == own.commit and identity["variant"] == own.variant_for(CPU).name


# ---------------------------------------------------------------- 5. typos: one line, a did-you-mean, exit 2


TYPO = FA2.replace("attn2", "atn2")  # kernels-community/flash-atn2


@pytest.mark.parametrize("typo", [TYPO, "flash-attn2"])
def test_a_misspelt_upgrade_kernel_is_refused_with_a_did_you_mean_whose_fix_works(
    locked_project: LockedProjectFactory, typo: str,
) -> None:
    from helpers import CUDA_X86

    project = locked_project([FA2, f"{ACT}@v1"], [CPU, CUDA_X86]).path
    before = snapshot(project)
    refused = error_line(run_kernlock("lock", "-P", typo, "--target", CUDA_X86, cwd=project))
    assert f"-P {typo}: no kernel of this project is named so" in refused and f"did you mean {FA2}?" in refused
    assert snapshot(project) == before
    [fix] = fix_commands(refused)
    assert fix == f"kernlock lock --target {CUDA_X86} -P {FA2}"
    fixed = run_fix(fix, project)
    assert fixed.returncode == 0, fixed.stderr
    assert snapshot(project) == before  # the branches did not move: re-resolving flash-attn2 keeps its pin


def test_an_override_keyed_to_a_misspelt_repo_is_refused_with_a_did_you_mean(locked_project: LockedProjectFactory) -> None:
    from helpers import CU128_ON_V2, CUDA_X86

    project = locked_project([FA2], [CPU, CUDA_X86]).path
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + CU128_ON_V2.replace(FA2, TYPO))
    before = snapshot(project)
    refused = error_line(run_kernlock("lock", cwd=project))
    assert f'[tool.kernlock.overrides."{TYPO}"] names no kernel of the project' in refused
    assert f"did you mean {FA2}?" in refused and refused.endswith(f"fix: key the override by '{FA2}' in pyproject.toml")
    assert snapshot(project) == before
    pyproject.write_text(pyproject.read_text().replace(TYPO, FA2))  # the fix, by hand
    assert run_kernlock("lock", cwd=project).returncode == 0
    assert any(k.override is not None for k in load_lockfile(project / "kernels.lock").kernels)


@pytest.mark.slow
def test_a_misspelt_use_kernels_entry_is_refused_with_a_did_you_mean(hub: TestHub, tmp_path: Path) -> None:
    from helpers import make_project

    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], extra=f'use-kernels = ["{ACT}ion"]\n')
    refused = error_line(run_kernlock("lock", cwd=project))
    assert f"use-kernels lists {ACT}ion" in refused and f"did you mean {ACT}?" in refused
    assert not (project / "kernels.lock").exists()
