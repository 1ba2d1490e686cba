"""Cluster scale: the cross-rank identity guard, torchrun/accelerate jobs under `kernlock run`, shared caches."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import CPU, make_project
from scripts.harness import FA2, PRELUDE, child_env, locked_project

CPU_212 = "torch2.12-cxx11-cpu-x86_64-linux"

INIT = "import torch.distributed as dist\ndist.init_process_group('gloo')\n"
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
        if under_kernlock:
            argv = [sys.executable, "-m", "kernlock", "run", "-v", *extra.pop("run_options", "").split(), "--", *argv]
        env = child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=world, LOCAL_WORLD_SIZE=world,
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **extra)
        procs.append(subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for argv_proc in procs:
        out, err = argv_proc.communicate(timeout=timeout)
        results.append(subprocess.CompletedProcess(argv_proc.args, argv_proc.returncode, out, err))
    return results


def mixed_project(root: Path, allow: bool | None = None) -> Path:
    """A project locking FA2 for two CPU targets (two variants of one commit)."""
    extra = "" if allow is None else f"allow-mixed-variants = {str(allow).lower()}\n"
    project = make_project(root, kernels=[FA2], targets=[CPU, CPU_212])
    if extra:
        text = (project / "pyproject.toml").read_text()
        (project / "pyproject.toml").write_text(text.replace("[tool.kernlock]\n", "[tool.kernlock]\n" + extra))
    from helpers import cli

    outcome = cli("lock", cwd=project)
    assert outcome.exit_code == 0, outcome.output
    return project


def failed_with_table(ranks: list[subprocess.CompletedProcess], problem: str) -> str:
    """Every rank failed inside init_process_group; rank 0's error holds the table, the others point at it."""
    for proc in ranks:
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert "RESULT" not in proc.stdout  # nothing after init_process_group ran
    assert "RankMismatchError: kernlock: " + problem in ranks[0].stderr, ranks[0].stderr[-3000:]
    for rank, proc in enumerate(ranks[1:], start=1):
        assert f"kernlock: rank {rank} stops: the ranks of this job disagree" in proc.stderr, proc.stderr[-3000:]
        assert "ranks  hosts" not in proc.stderr
    table = ranks[0].stderr[ranks[0].stderr.index("kernlock: " + problem):]
    assert "\nfix: " in table
    return table


@pytest.mark.parametrize("when", ["start-up hook", "apply() after init_process_group"])
def test_identical_ranks_pass_and_say_what_they_bind(hub, tmp_path: Path, when: str) -> None:
    project, lock = locked_project(tmp_path / "p", [FA2])
    [entry] = lock.kernels
    if when == "start-up hook":
        ranks = launch_ranks(INIT + AFTER_INIT, project, [{}, {}])
    else:
        code = INIT + "import kernlock\nkernlock.apply()\n" + AFTER_INIT
        ranks = launch_ranks(code, project, [{"KERNLOCK_VERBOSE": "1"}, {"KERNLOCK_VERBOSE": "1"}], under_kernlock=False)
    for rank, proc in enumerate(ranks):
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"RESULT {{\"rank\": {rank}, \"world\": 2}}" in proc.stdout
        bound = f"kernlock: rank {rank}/2: all ranks bind {project / 'kernels.lock'}"
        assert bound in proc.stderr, proc.stderr[-3000:]
        assert f"{FA2}@{entry.commit[:12]} [{entry.variant_for(CPU).name}]" in proc.stderr


def test_a_rank_with_another_lock_stops_every_rank_with_the_table(hub, tmp_path: Path) -> None:
    project, lock = locked_project(tmp_path / "p", [FA2])
    other, other_lock = locked_project(tmp_path / "q", [f"{FA2}@v2"])
    ranks = launch_ranks(INIT + AFTER_INIT, project, [{}, {"KERNLOCK_LOCKFILE": str(other / "kernels.lock")}])
    table = failed_with_table(ranks, "ranks read different lock files")
    rows = table.splitlines()
    assert rows[1].split()[:2] == ["ranks", "hosts"] and FA2 in rows[1]
    assert rows[2].split()[0] == "0" and lock.kernels[0].commit[:12] in rows[2] and str(project) in rows[2]
    assert rows[3].split()[0] == "1" and other_lock.kernels[0].commit[:12] in rows[3] and str(other) in rows[3]
    assert socket.gethostname() in rows[2]
    assert "point KERNLOCK_LOCKFILE at it" in table
    # The fix works: the same lock on every rank.
    fixed = launch_ranks(INIT + AFTER_INIT, project, [{}, {"KERNLOCK_LOCKFILE": str(project / "kernels.lock")}])
    assert [p.returncode for p in fixed] == [0, 0], fixed[1].stderr[-3000:]


@pytest.mark.parametrize("allow", [None, False, True], ids=["default", "opted-out", "opted-in"])
def test_mixed_variants_pass_only_when_opted_in(hub, tmp_path: Path, allow: bool | None) -> None:
    project = mixed_project(tmp_path / "p", allow)
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


def test_opt_in_on_some_ranks_only_is_not_enough_and_the_guard_can_be_switched_off(hub, tmp_path: Path) -> None:
    project = mixed_project(tmp_path / "p")
    ranks = launch_ranks(INIT + AFTER_INIT, project, [
        {"KERNLOCK_TARGET": CPU, "KERNLOCK_ALLOW_MIXED_VARIANTS": "1"}, {"KERNLOCK_TARGET": CPU_212}])
    failed_with_table(ranks, "ranks load different build variants")
    off = launch_ranks(INIT + AFTER_INIT, project, [
        {"KERNLOCK_TARGET": CPU, "KERNLOCK_RANK_CHECK": "0"}, {"KERNLOCK_TARGET": CPU_212, "KERNLOCK_RANK_CHECK": "0"}])
    assert [p.returncode for p in off] == [0, 0], off[0].stderr[-3000:]
    assert "all ranks bind" not in off[0].stderr


def test_a_rank_without_the_lock_is_named(hub, tmp_path: Path) -> None:
    project, _ = locked_project(tmp_path / "p", [FA2])
    applied = {"KERNLOCK_APPLY": "1", "KERNLOCK_LOCKFILE": str(project / "kernels.lock"), "KERNLOCK_RANK_CHECK_TIMEOUT": "2"}
    ranks = launch_ranks(INIT + AFTER_INIT, project, [applied, {}], under_kernlock=False)
    assert ranks[0].returncode != 0 and "RESULT" not in ranks[0].stdout
    assert "kernlock: rank(s) 1 did not report within the time limit" in ranks[0].stderr, ranks[0].stderr[-3000:]
    assert "start every rank under `kernlock run`" in ranks[0].stderr
