"""Benchmark 2 — time to kernel ready in a fresh process with a warm cache.

Locked: `import kernlock; kernlock.apply()` then `kernels.get_kernel(repo, version=1)`.
Unlocked: `kernels.get_kernel(repo, version=1)` alone. For 1, 5 and 10 kernels loaded
in one process (the targets are judged on 1). Torch and kernels are imported
before the clock starts in both, so "ready" measures the load path itself; the
whole-process wall time is reported next to it. A third child measures apply()'s
own overhead: `import torch` first, then time `import kernlock; kernlock.apply()`.
"""

from __future__ import annotations

from benchmarks.harness import (
    PYTHON,
    Result,
    Target,
    Workspace,
    child_env,
    kinds,
    lock_project,
    ratio,
    run_child,
    running_hub,
    summarize,
)

NAME = "load"

LOAD_CHILD = """
import json, sys, time
import torch, kernels
mode, repos = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
if mode == "locked":
    import kernlock
    kernlock.apply()
modules = [kernels.get_kernel(repo, version=1) for repo in repos]
ready = time.perf_counter()
assert [m.KERNEL_IDENTITY["repo"] for m in modules] == repos
print("BENCH " + json.dumps({"ready_ms": (ready - start) * 1000}))
"""

APPLY_CHILD = """
import json, time
import torch
start = time.perf_counter()
import kernlock
kernlock.apply()
applied = time.perf_counter()
import kernels
before = time.perf_counter()
kernlock.apply()
again = time.perf_counter()
print("BENCH " + json.dumps({"apply_ms": (applied - start) * 1000, "reapply_after_kernels_ms": (again - before) * 1000}))
"""


def run(ws: Workspace, quick: bool) -> Result:
    sizes = (1, 3) if quick else (1, 5, 10)
    reps = {size: (2 if quick else 7 if size == 1 else 3) for size in sizes}
    result = Result(NAME)
    all_repos = ws.repos(max(sizes))
    project = ws.path("load-project")
    hf_home = ws.path("load-hf-home")
    apply_runs = []
    for latency in (0.0, 0.05):
        with running_hub(all_repos, latency) as hub:
            env = child_env(hub, hf_home)
            if not (project / "kernels.lock").exists():
                lock_project(project, list(all_repos), hub, env)
                for mode in ("locked", "unlocked"):  # warm the cache through both paths
                    run_child([PYTHON, "-c", LOAD_CHILD, mode, *all_repos], hub, env, cwd=project)
            for size in sizes:
                repos = list(all_repos)[:size]
                runs: dict[str, list] = {"locked": [], "unlocked": []}
                for _ in range(reps[size]):
                    for mode in runs:
                        runs[mode].append(run_child([PYTHON, "-c", LOAD_CHILD, mode, *repos], hub, env, cwd=project))
                    if latency == 0.0 and size == 1:
                        apply_runs.append(run_child([PYTHON, "-c", APPLY_CHILD], hub, env, cwd=project))
                _report(result, latency, size, runs)
    overhead = summarize(apply_runs, ["apply_ms", "reapply_after_kernels_ms"])
    result.rows.append({"latency_ms": 0, "load": "import kernlock + apply() (torch imported)", "reps": overhead["reps"],
                        "ready_ms": overhead["apply_ms"], "process_ms": overhead["wall_ms"],
                        "requests": overhead["requests"]})
    result.rows.append({"latency_ms": 0, "load": "apply() again after import kernels", "reps": overhead["reps"],
                        "ready_ms": overhead["reapply_after_kernels_ms"]})
    result.data["apply"] = overhead
    result.targets.append(Target("apply(): import kernlock + apply() overhead (ms)", overhead["apply_ms"], "<= 50 ms",
                                 overhead["apply_ms"] <= 50))
    return result


def _report(result: Result, latency: float, size: int, runs: dict[str, list]) -> None:
    summaries = {mode: summarize(r, ["ready_ms"]) for mode, r in runs.items()}
    speedup = ratio(summaries["unlocked"]["ready_ms"], summaries["locked"]["ready_ms"])
    for mode, s in summaries.items():
        result.rows.append({
            "latency_ms": int(latency * 1000), "kernels": size, "load": f"{mode} get_kernel", "reps": s["reps"],
            "ready_ms": s["ready_ms"], "process_ms": s["wall_ms"], "requests": s["requests"],
            "requests_by_kind": kinds(s["requests_by_kind"]), "speedup": speedup if mode == "locked" else "",
        })
    result.data[f"{int(latency * 1000)}ms/{size}"] = summaries
    if size > 1:
        return
    result.targets.append(Target(f"load @{int(latency * 1000)}ms: locked warm load makes 0 Hub requests",
                                 summaries["locked"]["requests"], "0", summaries["locked"]["requests"] == 0))
    if latency:
        result.targets.append(Target("load @50ms: locked ready vs unlocked ready speedup", speedup, ">= 3x",
                                     speedup >= 3))
