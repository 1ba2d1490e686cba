"""Benchmark 4 — plain `kernlock verify` start-up cost, next to `python -c pass`.

A lock of 50 kernels x 20 variants (one per target, 4 files each) is written
directly with kernlock's dataclasses and `write_lockfile`, beside a pyproject
listing the same 50 specs in `[tool.kernels.dependencies]` and the 20 targets.
`python -m kernlock verify` and the `kernlock` console script run in fresh
processes (no Hub needed), with kernlock's parsed-lock cache (the first run fills it,
as `kernlock lock` does when it writes a lock) and without it (`KERNLOCK_NO_CACHE=1`). One extra run with `-X importtime` shows whether
torch, transformers, kernels or huggingface_hub get imported, and what dominates.
"""

from __future__ import annotations

import re

from benchmarks.harness import (
    KERNLOCK_CLI,
    PYTHON,
    Result,
    Target,
    Workspace,
    bench_targets,
    child_env,
    kernel_repo,
    median,
    ratio,
    run_child,
    synthetic_lock,
    write_project,
)
from kernlock._internal.lockfile.serialize import write_lockfile

NAME = "verify"
KERNELS, VARIANTS = 50, 20
HEAVY = ("torch", "transformers", "kernels", "huggingface_hub", "sigstore")
GOAL_MS = 150
GOAL_X_PASS = 5  # issue 47 item 6: plain verify within 5x `python -c pass`, measured in the same run


def imported(importtime: str) -> tuple[set[str], list[tuple[int, str]]]:
    """Top-level packages imported, and the (cumulative us, module) of the slowest top-level imports."""
    names, slowest = set(), []
    for line in importtime.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not match:
            continue
        names.add(match[4].split(".")[0])
        if len(match[3]) <= 1:
            slowest.append((int(match[2]), match[4]))
    return names, sorted(slowest, reverse=True)[:8]


def run(ws: Workspace, quick: bool) -> Result:
    reps = 5 if quick else 21
    result = Result(NAME)
    repos = [kernel_repo(i) for i in range(KERNELS)]
    project = write_project(ws.path("verify-project"), repos, targets=bench_targets(VARIANTS))
    write_lockfile(synthetic_lock(repos, VARIANTS), project / "kernels.lock")
    tiny = write_project(ws.path("verify-tiny"), repos[:1])  # fixed cost: the same command on a 1 x 1 lock
    write_lockfile(synthetic_lock(repos[:1], 1), tiny / "kernels.lock")
    env = child_env(None, ws.path("verify-hf-home"))
    uncached = {**env, "KERNLOCK_NO_CACHE": "1"}
    commands = {
        "python -c pass": ([PYTHON, "-c", "pass"], project, env),
        "python -m kernlock verify": ([PYTHON, "-m", "kernlock", "verify"], project, env),
        "kernlock verify (console script)": ([KERNLOCK_CLI, "verify"], project, env),
        "python -m kernlock verify, parse cache off": ([PYTHON, "-m", "kernlock", "verify"], project, uncached),
        "python -m kernlock verify, 1 kernel x 1 variant lock": ([PYTHON, "-m", "kernlock", "verify"], tiny, env),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(reps):
        for name, (argv, cwd, child) in commands.items():
            times[name].append(run_child(argv, None, child, cwd=cwd).wall * 1000)
    baseline = median(times["python -c pass"])
    for name, values in times.items():
        ms = round(median(values), 1)
        result.rows.append({"command": name, "reps": reps, "median_ms": ms, "min_ms": round(min(values), 1),
                            "x_python_pass": ratio(ms, baseline), "over_python_pass_ms": round(ms - baseline, 1)})
        result.data[name] = {"median_ms": ms, "all_ms": [round(v, 1) for v in values]}
        if name in ("python -m kernlock verify", "kernlock verify (console script)"):
            result.targets.append(Target(f"verify: {name} median (ms; 50 kernels x 20 variants)", ms,
                                         f"<= {GOAL_MS} ms", ms <= GOAL_MS))
            times_pass = ratio(ms, baseline)
            result.targets.append(Target(f"verify: {name} / python -c pass (issue 47)", times_pass,
                                         f"<= {GOAL_X_PASS}x", times_pass <= GOAL_X_PASS))
    trace = run_child([PYTHON, "-X", "importtime", "-m", "kernlock", "verify"], None, env, cwd=project)
    names, slowest = imported(trace.stderr)
    heavy = sorted(n for n in HEAVY if n in names)
    result.data.update(heavy_imports=heavy, slowest_imports_us=slowest, modules=sorted(names))
    result.notes.append(f"heavy imports: {', '.join(heavy) or 'none'}; slowest top-level imports (cumulative ms): "
                        + ", ".join(f"{name} {us / 1000:.1f}" for us, name in slowest))
    result.targets.append(Target("verify: imports none of torch/transformers/kernels/huggingface_hub/sigstore",
                                 ", ".join(heavy) or "none", "none", not heavy))
    return result
