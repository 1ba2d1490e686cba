"""Inspection commands: show, outdated, explain, export (round-tripped through kernels itself)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import ARM, CPU, CU128_ON_V2, CUDA_X86, FA2, LockedProjectFactory, cli
from kernlock._internal.lockfile.entries import Lockfile
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import advance_branch, git, push_commit, rev_parse, rewrite_branch
from kernlock.testing.hub import TestHub

ACT = "kernels-community/activation@v1"


def test_show(locked_project: LockedProjectFactory) -> None:
    project = locked_project([FA2, f"{FA2}@v2", "kernels-community/with-dep@v1"], targets=[CPU, CUDA_X86]).path
    lock = load_lockfile(project / "kernels.lock")
    result = cli("show", cwd=project)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["KERNEL", "PIN", *sorted([CPU, CUDA_X86])]
    bare = next(line for line in lines if line.startswith(FA2 + " "))
    assert f"v4 → {lock.kernel(FA2).commit[:12]}" in bare
    assert lock.kernel(FA2).variant_for(CPU).name in bare and lock.kernel(FA2).variant_for(CUDA_X86).name in bare
    assert any(line.startswith(f"{ACT} (dependency of kernels-community/with-dep@v1)") for line in lines)
    data = json.loads(cli("show", "--json", cwd=project).output)
    assert data["targets"] == sorted([CPU, CUDA_X86])
    assert data == lock.to_dict() and Lockfile.from_dict(data) == lock  # the lock itself, kernels.lock's keys
    entry = next(k for k in data["kernel"] if k["spec"] == f"{FA2}@v2")
    assert entry["commit"] == lock.kernel(f"{FA2}@v2").commit
    assert {t for v in entry["variant"] for t in v["targets"]} == {CPU, CUDA_X86}


def test_outdated(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2", f"{FA2}@v4", "kernels-community/tagged@v1.0.0"], targets=[CPU]).path
    result = cli("outdated", cwd=project)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["KERNEL", "REF", "LOCKED", "CURRENT", "LATEST", "STATUS"]
    assert len(lines) == 2 and lines[1].startswith(f"{FA2}@v2") and f"v4 available; pin {FA2}@v4" in lines[1]
    moved_to = advance_branch(hub.repo_path(FA2), "v4")
    data = json.loads(cli("outdated", "--json", cwd=project).output)
    by_spec = {item["spec"]: item for item in data}
    assert by_spec[f"{FA2}@v4"]["moved"] is True and by_spec[f"{FA2}@v4"]["current"] == moved_to
    assert by_spec[f"{FA2}@v4"]["newer_version"] is None
    assert by_spec[f"{FA2}@v2"]["moved"] is False and by_spec[f"{FA2}@v2"]["newer_version"] == 4
    assert by_spec["kernels-community/tagged@v1.0.0"]["moved"] is False
    result = cli("outdated", "--all", cwd=project)
    assert result.exit_code == 0
    assert "branch moved; kernlock lock -P kernels-community/flash-attn2" in result.output
    assert "up to date" in result.output


def outdated_rows(project: Path, *args: str) -> dict[str, str]:
    """`kernlock outdated --all` rows: KERNEL -> STATUS."""
    result = cli("outdated", "--all", *args, cwd=project)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start = lines[0].index("STATUS")
    return {line[:lines[0].index("REF")].strip(): line[start:] for line in lines[1:]}


def test_outdated_suggests_only_versions_with_a_build_for_the_locked_targets(
        hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], targets=[CPU]).path
    assert cli("outdated", "--exit-code", cwd=project).exit_code == 1  # v4 is there and builds for CPU
    repo = hub.repo_path(FA2)
    cpu_build = git(repo, "ls-tree", "-r", "--name-only", "v4", "build/torch213-cxx11-cpu-x86_64-linux").decode().split()
    push_commit(repo, "v4", dict.fromkeys(cpu_build), "v4 drops its torch 2.13 CPU build")
    assert outdated_rows(project) == {
        f"{FA2}@v2": f"v3 available; pin {FA2}@v3 (v4 has no build for {CPU})",
    }
    push_commit(repo, "v3", dict.fromkeys(cpu_build), "v3 drops its torch 2.13 CPU build")
    assert outdated_rows(project) == {f"{FA2}@v2": f"up to date (v3, v4 have no build for {CPU})"}
    assert cli("outdated", "--exit-code", cwd=project).exit_code == 0


def test_outdated_tells_a_force_push_from_a_move(hub: TestHub, locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v4", "kernels-community/tagged@dev"], targets=[CPU]).path
    advance_branch(hub.repo_path(FA2), "v4")
    rewrite_branch(hub.repo_path("kernels-community/tagged"), "dev")
    rows = outdated_rows(project)
    assert rows[f"{FA2}@v4"] == f"branch moved; kernlock lock -P {FA2}"
    assert rows["kernels-community/tagged@dev"] == (
        "branch force-pushed (the locked commit is no longer in its history); review, then kernlock lock -P kernels-community/tagged"
    )
    data = {item["spec"]: item for item in json.loads(cli("outdated", "--json", cwd=project).output)}
    assert data["kernels-community/tagged@dev"]["rewritten"] is True and data[f"{FA2}@v4"]["rewritten"] is False
    assert cli("outdated", "--exit-code", cwd=project).exit_code == 1


def test_outdated_names_override_entries(locked_project: LockedProjectFactory) -> None:
    project = locked_project([FA2], targets=[CPU, CUDA_X86], extra=CU128_ON_V2).path
    assert outdated_rows(project) == {
        FA2: "up to date",
        f"{FA2} [backend=cu128]": "v4 available; the override pins v2 ([tool.kernlock.overrides])",
    }
    data = json.loads(cli("outdated", "--json", cwd=project).output)
    assert sorted(item["override"] or "" for item in data) == ["", "backend=cu128"]
    assert cli("outdated", "--exit-code", cwd=project).exit_code == 0  # the override stays below v4 on purpose


def test_explain(locked_project: LockedProjectFactory) -> None:
    project = locked_project([f"{FA2}@v2"], targets=[CPU, CUDA_X86]).path
    kernel = load_lockfile(project / "kernels.lock").kernel(f"{FA2}@v2")
    cpu_variant = kernel.variant_for(CPU).name
    result = cli("explain", FA2, "--target", CPU, "--target", ARM, cwd=project)
    assert result.exit_code == 0, result.output
    assert f"target {CPU}: kernels picks {cpu_variant}; the lock has {cpu_variant}" in result.output
    assert f"   * {cpu_variant}: chosen" in result.output
    assert f"target {ARM}:" in result.output and "nothing (target not locked)" in result.output
    # Every build variant at the commit gets a verdict.
    for name in kernel.build_variants:
        assert f"{name}:" in result.output
    data = json.loads(cli("explain", f"{FA2}@v2", "--json", cwd=project).output)
    assert [t["target"] for t in data[0]["targets"]] == sorted([CPU, CUDA_X86])
    assert all(t["agrees"] for t in data[0]["targets"])
    result = cli("explain", "kernels-community/nope", cwd=project)
    assert result.exit_code == 2 and "not in the lock" in result.output


def test_export_round_trips_through_kernels(hub: TestHub, locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    import kernels

    project = locked_project([f"{FA2}@v2", "kernels-community/with-dep@v1", "kernels-community/tagged@dev"], [CPU]).path
    # Move the branches on, so only the lock can name the old commits.
    for repo, branch in ((FA2, "v2"), ("kernels-community/tagged", "dev")):
        advance_branch(hub.repo_path(repo), branch)
    lock = load_lockfile(project / "kernels.lock")
    out = tmp_path / "kernels-lock.json"
    result = cli("export", "--format", "kernels", "-o", str(out), cwd=project)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert {(e["dependency"]["repo-id"], e["lock"]["commit"]) for e in data} == {(k.repo, k.commit) for k in lock.kernels}
    stdout = cli("export", cwd=project).output
    assert json.loads(stdout) == data

    for spec in (f"{FA2}@v2", "kernels-community/tagged@dev", "kernels-community/with-dep@v1"):
        kernel = lock.kernel(spec)
        module = kernels.get_locked_kernel(kernel.repo, lockfile=out)
        identity = module.KERNEL_IDENTITY
        assert identity["repo"] == kernel.repo and identity["commit"] == kernel.commit, identity
        assert identity["variant"] == kernel.variant_for(CPU).name
    assert lock.kernel(f"{FA2}@v2").commit != rev_parse(hub.repo_path(FA2), "v2")
