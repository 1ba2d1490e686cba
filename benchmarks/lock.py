"""Benchmark 1 — `kernlock lock` vs the anchor `kernels lock` (cold cache, fresh process).

Both read the same kernels from `[tool.kernels.dependencies]` of a pyproject.toml;
kernlock also locks two targets (`[tool.kernlock] targets`, which kernels ignores):
the CPU environment here and a CUDA one. Each repetition runs in a fresh
process with a fresh HF_HOME and a fresh project (no previous lock to keep pins from).
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness import (
    CPU_TARGET,
    CUDA_TARGET,
    KERNELS_CLI,
    Result,
    Target,
    Workspace,
    child_env,
    kernlock_lock_argv,
    ratio,
    run_child,
    running_hub,
    summarize,
    write_project,
)
from kernlock._internal.lockfile.serialize import load_lockfile

NAME = "lock"
TARGETS = (CPU_TARGET, CUDA_TARGET)
TOOLS = ("kernels lock", "kernlock lock")


def _commands(project: Path) -> dict[str, list[str]]:
    return {
        "kernels lock": [KERNELS_CLI, "lock", str(project)],
        "kernlock lock": kernlock_lock_argv(project),
    }


def recorded(tool: str, lockfile: Path) -> dict[str, int]:
    """What a tool's lock file records: kernels, commits, variants, file hashes."""
    if tool == "kernels lock":
        entries = json.loads(lockfile.read_text())
        return {"kernels": len(entries), "commits": sum("commit" in e.get("lock", {}) for e in entries),
                "variants": 0, "file_hashes": 0}
    lock = load_lockfile(lockfile)
    return {"kernels": len(lock.kernels), "commits": len(lock.kernels),
            "variants": sum(len(k.variants) for k in lock.kernels),
            "file_hashes": sum(len(v.files) for k in lock.kernels for v in k.variants)}


def _commits(tool: str, lockfile: Path) -> dict[str, str]:
    if tool == "kernels lock":
        return {e["dependency"]["repo-id"]: e["lock"]["commit"] for e in json.loads(lockfile.read_text())}
    return {k.repo: k.commit for k in load_lockfile(lockfile).kernels}


def run(ws: Workspace, quick: bool) -> Result:
    sizes = (1, 10) if quick else (1, 10, 50)
    reps = {1: 1, 10: 1} if quick else {1: 5, 10: 3, 50: 2}
    result = Result(NAME)
    for latency in (0.0, 0.05):
        for size in sizes:
            repos = ws.repos(size)
            lockfiles: dict[str, Path] = {}
            with running_hub(repos, latency) as hub:
                runs: dict[str, list] = {tool: [] for tool in TOOLS}
                for _ in range(reps[size]):
                    for tool in TOOLS:  # interleaved, so drift hits both tools alike
                        project = write_project(ws.path("lock-project"), list(repos), targets=TARGETS)
                        hf_home = ws.path("hf-home")
                        runs[tool].append(run_child(_commands(project)[tool], hub, child_env(hub, hf_home)))
                        lockfiles[tool] = project / "kernels.lock"
            summaries = {tool: summarize(runs[tool]) for tool in TOOLS}
            records = {tool: recorded(tool, lockfiles[tool]) for tool in TOOLS}
            commits = {tool: _commits(tool, lockfiles[tool]) for tool in TOOLS}
            if commits["kernels lock"] != commits["kernlock lock"]:
                result.notes.append(f"{size} kernels: the two tools locked different commits")
            speedup = ratio(summaries["kernels lock"]["wall_ms"], summaries["kernlock lock"]["wall_ms"])
            for tool, s in summaries.items():
                result.rows.append({
                    "latency_ms": int(latency * 1000), "kernels": size, "tool": tool, "reps": s["reps"],
                    "median_ms": s["wall_ms"], "requests": s["requests"], "per_kernel": round(s["requests"] / size, 2),
                    "bytes": s["bytes"],
                    "speedup": speedup if tool == "kernlock lock" else "",
                    "variants": records[tool]["variants"], "file_hashes": records[tool]["file_hashes"],
                })
            result.data[f"{int(latency * 1000)}ms/{size}"] = {"summaries": summaries, "recorded": records}
            if latency and size >= 10:
                result.targets.append(Target(
                    f"lock {size} kernels @50ms: kernlock speedup vs kernels lock", speedup, ">= 5x", speedup >= 5,
                ))
                if size >= 50:  # issue 33 item 6: the lock stays fast with more entries
                    result.targets.append(Target(
                        f"lock {size} kernels @50ms: kernlock speedup vs kernels lock (issue 33)", speedup, ">= 50x",
                        speedup >= 50,
                    ))
                    fixed = sum(n for kind, n in summaries["kernlock lock"]["requests_by_kind"].items()
                                if kind in ("overview", "agent-registry"))  # per org, per process: not per kernel
                    per_kernel = round((summaries["kernlock lock"]["requests"] - fixed) / size, 2)
                    result.targets.append(Target(
                        f"lock {size} kernels x {len(TARGETS)} targets: kernlock Hub requests per kernel (issue 33)",
                        per_kernel, "<= 2", per_kernel <= 2,
                    ))
                extra = records["kernlock lock"]
                result.targets.append(Target(
                    f"lock {size} kernels: records variants + file hashes (kernels lock records neither)",
                    f"{extra['variants']} variants, {extra['file_hashes']} hashes vs 0/0",
                    "> 0", extra["variants"] > 0 and extra["file_hashes"] > 0,
                ))
    return result

