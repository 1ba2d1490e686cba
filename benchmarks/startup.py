"""Benchmark 6 — what `kernlock run` costs each Python process it starts.

Every child of `kernlock run` (and of a job script that ran `eval "$(kernlock run
--export)"`) starts with kernlock's start-up hook armed. Measured in fresh processes
with a warm cache, each with and without the hook's environment, interleaved:
`python -c pass` (a process that imports no kernels: dataloader workers, `pip`,
shell helpers), `import kernels` (the hook applies the lock at that import), and
`import kernels` + `get_kernel` (a locked load: must make 0 Hub requests).
"""

from __future__ import annotations

from benchmarks.harness import (
    PYTHON,
    Result,
    Target,
    Workspace,
    child_env,
    lock_project,
    median,
    run_child,
    running_hub,
    summarize,
)
from kernlock._internal.cli.commands.run import run_environment

NAME = "startup"

CASES = {
    "python -c pass": "pass",
    "import kernels": "import kernels",
    "import kernels + get_kernel": "import sys, kernels; kernels.get_kernel(sys.argv[1], version=1)",
}


def run(ws: Workspace, quick: bool) -> Result:
    reps = 5 if quick else 21
    result = Result(NAME)
    repos = ws.repos(1)
    [repo] = list(repos)
    project = ws.path("startup-project")
    hf_home = ws.path("startup-hf-home")
    with running_hub(repos) as hub:
        plain = child_env(hub, hf_home)
        lock_project(project, [repo], hub, plain)
        hooked = {**plain, **run_environment(project / "kernels.lock")}
        hooked["PYTHONPATH"] = hooked["PYTHONPATH"].rstrip(":")
        for env in (plain, hooked):  # warm the cache and the bytecode of both paths
            run_child([PYTHON, "-c", CASES["import kernels + get_kernel"], repo], hub, env, cwd=project)
        summaries = {}
        for case, code in CASES.items():
            runs: dict[str, list] = {"without hook": [], "kernlock run": []}
            for _ in range(reps):
                for mode, env in (("without hook", plain), ("kernlock run", hooked)):
                    runs[mode].append(run_child([PYTHON, "-c", code, repo], hub, env, cwd=project))
            summaries[case] = {mode: summarize(r) for mode, r in runs.items()}
            base, under = summaries[case]["without hook"], summaries[case]["kernlock run"]
            result.rows.append({
                "process": case, "reps": reps, "without_hook_ms": base["wall_ms"], "kernlock_run_ms": under["wall_ms"],
                "overhead_ms": round(under["wall_ms"] - base["wall_ms"], 1),
                "requests_without": base["requests"], "requests_kernlock_run": under["requests"],
            })
        hook_ms = median([_sitecustomize_ms(run_child([PYTHON, "-X", "importtime", "-c", "pass"], None, hooked))
                          for _ in range(reps)])
    result.rows.append({"process": "python -c pass: the hook's own import time (-X importtime)", "reps": reps,
                        "kernlock_run_ms": round(hook_ms, 2)})
    result.data.update(summaries, hook_import_ms=hook_ms)
    result.notes.append("wall-clock overheads are medians of interleaved runs on a shared machine; the import-time "
                        "row is the hook's own cost, free of that noise")
    result.targets.append(Target("startup: hook's import time per child under kernlock run, no kernel imports (ms)",
                                 round(hook_ms, 2), "<= 10 ms", hook_ms <= 10))
    locked = summaries["import kernels + get_kernel"]["kernlock run"]["requests"]
    result.targets.append(Target("startup: locked load under kernlock run makes 0 Hub requests", locked, "0",
                                 locked == 0))
    return result


def _sitecustomize_ms(run) -> float:
    """Import time of kernlock's start-up hook, from `-X importtime`: `sitecustomize` plus `kernlock._internal.runtime.autoapply`
    (summed: where an older kernlock's `.pth` imports the latter first, it is not inside the former; elsewhere
    this counts it twice, an overestimate)."""
    times = {}
    for line in run.stderr.splitlines():
        name = line.rsplit("|", 1)[-1].strip()
        if line.startswith("import time:") and name in ("sitecustomize", "kernlock._internal.runtime.autoapply"):
            times[name] = int(line.split("|")[1]) / 1000
    if "sitecustomize" not in times:
        raise RuntimeError("the start-up hook did not run (no sitecustomize import)")
    return sum(times.values())
