"""Cluster scale: the cross-rank identity guard, torchrun/accelerate jobs under `kernlock run`, shared caches."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from helpers import CPU, FA2, REPO_ROOT, LockedProjectFactory, run_kernlock
from kernlock._internal.lockfile.entries import LockedKernel
from kernlock.testing.hub import TestHub
from scripts.harness import (
    PRELUDE,
    child_env,
    completed,
    ok,
    only_locked_files_requested,
    run,
    variant_of,
)

CPU_212 = "torch2.12-cxx11-cpu-x86_64-linux"
TWO_RANKS = REPO_ROOT / "examples" / "cluster" / "two_ranks.sh"

# Like a training script: transformers imported first (under `kernlock run` that import applies the lock).
INIT = "import transformers\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
AFTER_INIT = "tiny.result(rank=dist.get_rank(), world=dist.get_world_size())\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_ranks(code: str, cwd: Path, per_rank: list[dict[str, str]], *, under_kernlock: bool = True,
                 timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Start one process per entry of `per_rank` as the ranks of one gloo job (env:// rendezvous), each with its
    own extra environment, under `kernlock run -v` unless told otherwise; wait for all."""
    port = str(free_port())
    world = str(len(per_rank))
    procs = []
    for rank, extra in enumerate(per_rank):
        argv = [sys.executable, "-c", PRELUDE + code]
        if under_kernlock and not extra.pop("without_kernlock", ""):
            argv = [sys.executable, "-m", "kernlock", "run", "-v", *extra.pop("run_options", "").split(), "--", *argv]
        env = child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=world, LOCAL_WORLD_SIZE=world,
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **extra)
        procs.append(subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for argv_proc in procs:
        out, err = argv_proc.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(argv_proc.args, argv_proc.returncode, out, err))
    return results


def mixed_project(locked_project: LockedProjectFactory, allow: bool | None = None) -> Path:
    """A project locking FA2 for two CPU targets (two variants of one commit)."""
    extra = "" if allow is None else f"allow-mixed-variants = {str(allow).lower()}\n"
    return locked_project([FA2], [CPU, CPU_212], extra=extra).path


def failed_with_table(ranks: list[subprocess.CompletedProcess], problem: str) -> str:
    """Every rank failed inside init_process_group; rank 0's error holds the table, the others point at it."""
    for proc in ranks:
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert "RESULT" not in proc.stdout  # nothing after init_process_group ran
    assert "RankMismatchError: " + problem in ranks[0].stderr, ranks[0].stderr[-3000:]
    for rank, proc in enumerate(ranks[1:], start=1):
        assert f"RankMismatchError: rank {rank} stops: the ranks of this job disagree" in proc.stderr, proc.stderr[-3000:]
        assert "ranks  hosts" not in proc.stderr
    table = ranks[0].stderr[ranks[0].stderr.index(problem):]
    assert "\nfix: " in table
    return table


def all_bind_one_lock(ranks: list[subprocess.CompletedProcess], lockfile: Path, entry: LockedKernel) -> None:
    """Every rank ran past init_process_group and said which lock and builds all ranks bind."""
    for rank, proc in enumerate(ranks):
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"RESULT {{\"rank\": {rank}, \"world\": 2}}" in proc.stdout
        assert f"kernlock: rank {rank}/2: all ranks bind {lockfile}" in proc.stderr, proc.stderr[-3000:]
        assert f"{FA2}@{entry.commit[:12]} [{entry.variant_for(CPU).name}]" in proc.stderr


@pytest.mark.slow
def test_identical_ranks_pass_and_say_what_they_bind_with_apply_after_init(locked_project: LockedProjectFactory) -> None:
    """Ranks calling apply() after init_process_group pass; the start-up hook's case is the next test's fixed job."""
    project, lock = locked_project([FA2])
    code = INIT + "import kernlock\nkernlock.apply()\n" + AFTER_INIT
    ranks = launch_ranks(code, project, [{"KERNLOCK_VERBOSE": "1"}, {"KERNLOCK_VERBOSE": "1"}], under_kernlock=False)
    all_bind_one_lock(ranks, project / "kernels.lock", lock.kernels[0])


@pytest.mark.slow
def test_a_rank_with_another_lock_stops_every_rank_with_the_table(locked_project: LockedProjectFactory,
                                                                  tmp_path: Path) -> None:
    project, lock = locked_project([FA2])
    other, other_lock = locked_project([f"{FA2}@v2"], root=tmp_path / "q")
    ranks = launch_ranks(INIT + AFTER_INIT, project, [{}, {"KERNLOCK_LOCKFILE": str(other / "kernels.lock")}])
    table = failed_with_table(ranks, "ranks read different lock files")
    rows = table.splitlines()
    assert rows[1].split()[:2] == ["ranks", "hosts"] and FA2 in rows[1]
    assert rows[2].split()[0] == "0" and lock.kernels[0].commit[:12] in rows[2] and str(project) in rows[2]
    assert rows[3].split()[0] == "1" and other_lock.kernels[0].commit[:12] in rows[3] and str(other) in rows[3]
    assert socket.gethostname() in rows[2]
    assert "point KERNLOCK_LOCKFILE at it" in table
    # The fix works: the same lock on every rank, and the start-up hook of `kernlock run` says what all ranks bind.
    fixed = launch_ranks(INIT + AFTER_INIT, project, [{}, {"KERNLOCK_LOCKFILE": str(project / "kernels.lock")}])
    all_bind_one_lock(fixed, project / "kernels.lock", lock.kernels[0])


@pytest.mark.slow
def test_a_mismatch_found_by_the_start_up_hook_is_one_error_line_per_rank(locked_project: LockedProjectFactory,
                                                                          tmp_path: Path) -> None:
    """init_process_group before the first kernels/transformers import: the hook's apply() runs the guard."""
    project, _ = locked_project([FA2])
    other, _ = locked_project([f"{FA2}@v2"], root=tmp_path / "q")
    code = "import torch.distributed as dist\ndist.init_process_group('gloo')\nimport transformers\n" + AFTER_INIT
    ranks = launch_ranks(code, project, [{}, {"KERNLOCK_LOCKFILE": str(other / "kernels.lock")}])
    assert [p.returncode for p in ranks] == [1, 1], ranks[0].stderr[-3000:]
    assert "RESULT" not in ranks[0].stdout + ranks[1].stdout
    assert "kernlock: error: ranks read different lock files:\n  ranks  hosts" in ranks[0].stderr, ranks[0].stderr[-3000:]
    assert "kernlock: error: rank 1 stops: the ranks of this job disagree" in ranks[1].stderr, ranks[1].stderr[-3000:]
    for proc in ranks:
        assert "kernlock: error: kernlock:" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("allow", [None, True], ids=["default", "opted-in"])  # `= false` is the default (unit test)
@pytest.mark.slow
def test_mixed_variants_pass_only_when_opted_in(locked_project: LockedProjectFactory, allow: bool | None) -> None:
    project = mixed_project(locked_project, allow)
    ranks = launch_ranks(INIT + AFTER_INIT, project, [{"KERNLOCK_TARGET": CPU}, {"KERNLOCK_TARGET": CPU_212}])
    if not allow:
        table = failed_with_table(ranks, "ranks load different build variants of the same commits")
        assert "torch213-cxx11-cpu-x86_64-linux" in table and "torch212-cxx11-cpu-x86_64-linux" in table
        assert "allow-mixed-variants = true" in table
        return
    assert [p.returncode for p in ranks] == [0, 0], ranks[0].stderr[-3000:]
    # Allowed, and still logged (once, by rank 0) with the table.
    assert "kernlock: ranks load different variants of the same commits (allowed" in ranks[0].stderr
    assert "torch212-cxx11-cpu-x86_64-linux" in ranks[0].stderr
    assert "ranks  hosts" not in ranks[1].stderr


@pytest.mark.slow
def test_opt_in_on_some_ranks_only_is_not_enough_and_the_guard_can_be_switched_off(
    locked_project: LockedProjectFactory,
) -> None:
    project = mixed_project(locked_project)
    ranks = launch_ranks(INIT + AFTER_INIT, project, [
        {"KERNLOCK_TARGET": CPU, "KERNLOCK_ALLOW_MIXED_VARIANTS": "1"}, {"KERNLOCK_TARGET": CPU_212}])
    failed_with_table(ranks, "ranks load different build variants")
    off = launch_ranks(INIT + AFTER_INIT, project, [
        {"KERNLOCK_TARGET": CPU, "KERNLOCK_RANK_CHECK": "0"}, {"KERNLOCK_TARGET": CPU_212, "KERNLOCK_RANK_CHECK": "0"}])
    assert [p.returncode for p in off] == [0, 0], off[0].stderr[-3000:]
    assert "all ranks bind" not in off[0].stderr


@pytest.mark.slow
def test_a_rank_without_the_lock_is_named(locked_project: LockedProjectFactory) -> None:
    project, _ = locked_project([FA2])
    ranks = launch_ranks(INIT + AFTER_INIT, project, [{"KERNLOCK_RANK_CHECK_TIMEOUT": "2"}, {"without_kernlock": "1"}])
    assert ranks[0].returncode != 0 and "RESULT" not in ranks[0].stdout
    assert "RankMismatchError: rank(s) 1 did not report within the time limit" in ranks[0].stderr, ranks[0].stderr[-3000:]
    assert "start every rank under `kernlock run`" in ranks[0].stderr


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
@pytest.mark.slow
def test_ddp_job_under_kernlock_run_binds_every_rank_to_the_lock(hub: TestHub, locked_project: LockedProjectFactory,
                                                                 launcher: str) -> None:
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    hub.reset_counts()
    proc = run([str(TWO_RANKS), launcher, "--steps", "2"], project)  # kernlock run -v -- torchrun|accelerate launch
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    for rank in (0, 1):
        assert f"rank {rank}/2: step 1 loss" in proc.stdout
        assert f"rank {rank}/2: kernel {FA2} {entry.commit} [{variant_of(lock, entry)}]" in proc.stdout, proc.stdout
        assert f"kernlock: rank {rank}/2: all ranks bind {project / 'kernels.lock'}" in proc.stderr, proc.stderr[-5000:]
    assert proc.stderr.count(f"kernlock: {FA2} (version 4) -> {entry.commit} [{variant_of(lock, entry)}]") == 2
    checksums = set(re.findall(r"rank \d/2: parameter checksum (-?\d+\.\d{6})", proc.stdout))  # ranks share stdout: a line may lose its newline
    assert len(checksums) == 1, proc.stdout  # DDP kept the ranks' weights identical
    # Two ranks on one cold cache: each locked file was downloaded once, not once per rank.
    only_locked_files_requested(hub, lock)
    downloads = Counter(path for method, path in hub.log if method == "GET" and "/resolve/" in path)
    assert set(downloads.values()) == {1}, downloads


LOAD = (
    "import kernels\n"
    "module = kernels.get_kernel(sys.argv[1], version=4)\n"
    "tiny.result(uid=os.getuid(), identity=module.KERNEL_IDENTITY)\n"
)


RANK_UID = 65534  # nobody


PROBE = "import importlib.util, kernels, torch; assert importlib.util.find_spec('kernlock.__main__')"  # `-m kernlock`


def interpreter_for_another_user() -> tuple[str, str]:
    """A Python the second uid can run with this test's packages, and what to add to its path: ours, else the
    system's of the same version with our site-packages (a virtualenv under /root points at an interpreter that
    other users cannot run)."""
    import site

    import kernlock

    ours = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    # site-packages, and where kernlock lies when it is an editable install (its .pth is not read from PYTHONPATH)
    paths = os.pathsep.join([*site.getsitepackages(), str(Path(kernlock.__file__).parent.parent)])
    for python, extra in ((sys.executable, ""), (ours, paths)):
        env = child_env()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env["PYTHONPATH"], extra) if p)
        try:  # from "/": the current directory must not lend the probe a kernlock the ranks would not see
            probe = subprocess.run([python, "-c", PROBE], capture_output=True,
                                   env=env, cwd="/", user=RANK_UID, group=RANK_UID, extra_groups=[], timeout=120)
        except OSError:
            continue
        if probe.returncode == 0:
            return python, extra
    pytest.skip("no Python interpreter with torch and kernels that a second uid can run")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to run ranks as a second uid")
@pytest.mark.parametrize("layout", ["synced HF_HOME", "vendor directory"])
@pytest.mark.slow
def test_ranks_of_another_user_load_from_a_read_only_shared_cache(hub: TestHub, locked_project: LockedProjectFactory,
                                                                 layout: str) -> None:
    python, site_packages = interpreter_for_another_user()
    shared = Path(tempfile.mkdtemp(prefix="kernlock-shared-"))  # outside root's private pytest directory
    home = shared.parent / f"{shared.name}-rank-home"  # the ranks' uid's HOME, writable by it
    try:
        shared.chmod(0o755)
        project, lock = locked_project([FA2], root=shared / "p")
        [entry] = lock.kernels
        if layout == "synced HF_HOME":
            prepared = run_kernlock("sync", cwd=project, env={"HF_HOME": str(shared / "hf_home")})
            where = {"HF_HOME": str(shared / "hf_home")}
            options: list[str] = []
        else:
            prepared = run_kernlock("vendor", str(shared / "vendor"), cwd=project)
            where = {"HF_HOME": str(shared / "empty_hf_home")}
            options = ["--vendor", str(shared / "vendor")]
        assert prepared.returncode == 0, prepared.stderr
        private = [p for p in shared.rglob("*") if p.is_file() and not p.is_symlink() and not p.stat().st_mode & 0o004]
        if private:  # the download path's blob modes from the umask (issue #14) are not on this branch yet
            pytest.xfail(f"needs blobs moded from the umask (#14): {private[0]} is private to its owner")
        subprocess.run(["chmod", "-R", "a-w", str(shared)], check=True)  # the ranks' view: read-only
        home.mkdir()
        os.chown(home, RANK_UID, RANK_UID)
        env = {key: value for key, value in child_env(**where, HOME=str(home)).items() if key != "KERNLOCK_CACHE_DIR"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env["PYTHONPATH"], site_packages) if p)
        hub.reset_counts()
        argv = [python, "-m", "kernlock", "run", *options, "--", python, "-c", PRELUDE + LOAD, FA2]
        ranks = [subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  user=RANK_UID, group=RANK_UID, extra_groups=[]) for _ in range(2)]
        for rank in ranks:
            out, err = rank.communicate(timeout=120)
            result = ok(completed(argv, rank.returncode, out, err))
            assert result["uid"] == RANK_UID
            assert result["identity"]["repo"] == FA2 and result["identity"]["commit"] == entry.commit
        assert hub.log == [], hub.log  # zero Hub requests
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(shared)], check=False)
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
