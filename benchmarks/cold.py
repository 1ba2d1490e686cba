"""Benchmark 3 — cold-start bytes: what a first load downloads with an empty cache.

Locked cold load (`kernlock.apply()` + `get_kernel`) should fetch exactly the one
locked variant; compared with unlocked `get_kernel`, `kernels download <project>`
and `kernels download <project> --all-variants` (both from a `kernels lock` lock of
the same kernel, in their own project directory since both tools name their lock
`kernels.lock`). Every run gets a fresh HF_HOME; the Hub answers with 50 ms latency.
"""

from __future__ import annotations

from benchmarks.harness import (
    CPU_TARGET,
    KERNELS_CLI,
    PYTHON,
    Result,
    Target,
    Workspace,
    child_env,
    kinds,
    lock_project,
    run_child,
    running_hub,
    summarize,
    write_project,
)
from benchmarks.load import LOAD_CHILD
from kernlock._internal.lockfile.serialize import load_lockfile

NAME = "cold"
LATENCY = 0.05


def run(ws: Workspace, quick: bool) -> Result:
    reps = 1 if quick else 3
    result = Result(NAME)
    repos = ws.repos(1)
    repo = next(iter(repos))
    kernlock_project, kernels_project = ws.path("cold-kernlock"), ws.path("cold-kernels")
    with running_hub(repos, LATENCY) as hub:
        lock_project(kernlock_project, [repo], hub, child_env(hub, ws.path("hf-home")))
        write_project(kernels_project, [repo])
        run_child([KERNELS_CLI, "lock", str(kernels_project)], hub, child_env(hub, ws.path("hf-home")))
        kernel = load_lockfile(kernlock_project / "kernels.lock").kernels[0]
        variant = kernel.variant_for(CPU_TARGET)
        assert variant is not None
        variant_bytes = sum(f.size for f in variant.files)
        entries = hub.repos[repo].entries(kernel.commit)
        all_bytes = sum(e.size for p, e in entries.items() if e.type == "file" and p.startswith("build/"))
        cases = {
            "locked get_kernel (apply)": ([PYTHON, "-c", LOAD_CHILD, "locked", repo], kernlock_project),
            "unlocked get_kernel": ([PYTHON, "-c", LOAD_CHILD, "unlocked", repo], kernlock_project),
            "kernels download": ([KERNELS_CLI, "download", str(kernels_project)], kernels_project),
            "kernels download --all-variants": ([KERNELS_CLI, "download", str(kernels_project), "--all-variants"],
                                                kernels_project),
        }
        runs: dict[str, list] = {case: [] for case in cases}
        for _ in range(reps):
            for case, (argv, cwd) in cases.items():
                runs[case].append(run_child(argv, hub, child_env(hub, ws.path("hf-home")), cwd=cwd))
    for case, case_runs in runs.items():
        s = summarize(case_runs)
        result.rows.append({
            "latency_ms": int(LATENCY * 1000), "cold load": case, "reps": s["reps"], "process_ms": s["wall_ms"],
            "requests": s["requests"], "requests_by_kind": kinds(s["requests_by_kind"]), "bytes": s["bytes"],
            "file_bytes": s["file_bytes"], "x_variant_size": round(s["file_bytes"] / variant_bytes, 2),
        })
        result.data[case] = s
    result.data.update(variant_bytes=variant_bytes, all_variants_bytes=all_bytes, variants=len(kernel.build_variants))
    result.notes.append(f"locked variant {variant.name}: {variant_bytes} bytes in {len(variant.files)} files; "
                        f"all {len(kernel.build_variants)} variants: {all_bytes} bytes")
    locked = result.data["locked get_kernel (apply)"]
    result.targets.append(Target("cold: locked load file bytes / locked variant size",
                                 round(locked["file_bytes"] / variant_bytes, 3), "== 1 (exactly one variant)",
                                 locked["file_bytes"] == variant_bytes))
    result.targets.append(Target("cold: locked load non-file bytes (API/JSON responses)",
                                 locked["bytes"] - locked["file_bytes"], "<= 1024", locked["bytes"] - locked["file_bytes"] <= 1024))
    return result
