"""Benchmark 6 — cold nodes against a rate-limited Hub or a registry, a cluster job's cold start, and the guard's cost.

Nodes (issue 47): N = 1, 8, 32, 64 cold "nodes" (processes started at once, each with its own empty HF_HOME)
run `kernlock sync` of one small lock (1 kernel, 1 target) against the test Hub at 50 ms latency with a 429
rate limit (a scaled-down fixed-window quota, `NODE_RATE_LIMITS` per `NODE_RATE_WINDOW`), once from the Hub and
once `kernlock sync --from oci://…` from the real CNCF registry (tests/registry.py starts it) after one
`kernlock vendor --to oci://…`. Hub requests come from the test Hub's own count, registry requests from the
registry's access log (one line per request it answered); failures are nodes that exited non-zero.

Cold start: 64 processes start at once on one empty shared cache against the
test Hub at 50 ms latency, as the ranks of one node would. Locked: each
applies the lock and fetches the locked variant the way the locked loader does
(`kernlock.apply()` + `ensure_variant`, per-file locks in the cache). Unlocked:
each runs kernels' own `get_kernel(repo, version=1)` sequence (kernels 0.19's
`install_kernel`: version → commit, variant listing, trust check, snapshot
download). Neither imports torch, so 64 fit in memory: the unlocked child takes
Torch's version from installed metadata for kernels' own variant decision instead
of importing torch, and one real `get_kernel` (with torch) checks which requests it
adds. Requests,
requests per kind, wall time, slowest process and 429 answers are counted.

Guard: jobs of 4 ranks (gloo, loopback) each initialise one process group; the
guard's own time is measured in every rank (the slowest rank counts).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

from benchmarks.harness import (
    CPU_TARGET,
    PYTHON,
    Result,
    Target,
    Workspace,
    child_env,
    kinds,
    lock_project,
    median,
    run_child,
    running_hub,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import RATE_LIMITS, TestHub

NAME = "cluster"
LATENCY = 0.05
PROCESSES = 64
GUARD_RANKS = 4
NODES = (1, 8, 32, 64)
# a quota that 64 cold nodes pulling from the Hub exceed (the anonymous ones are 500 API calls and 3,000 resolves
# per 5 minutes): 429s then hold nodes until the window resets, as on the real Hub
NODE_RATE_LIMITS = {"api": 100, "resolvers": 200}
NODE_RATE_WINDOW = 20.0
_ACCESS_LINE = re.compile(r'^\S+ - \S+ \[[^]]+\] "[A-Z]+ /', re.MULTILINE)  # the registry's access log, per request

LOCKED_CHILD = """
import json, time
start = time.perf_counter()
from kernlock._internal.fetch.download import ensure_variant
from kernlock._internal.runtime.apply import active_lock, apply
applied = apply()
for entry in active_lock().kernels:
    ensure_variant(entry, entry.variant_for(applied.target))
print("BENCH " + json.dumps({"ready_ms": (time.perf_counter() - start) * 1000}))
"""

# kernels.get_kernel(repo, version=1) on a cold cache as kernels 0.19's `install_kernel` runs it (version -> commit,
# variant listing, trust check, snapshot download), less the final import. Torch is not imported: the backend is the
# CPU (what torch's CPU build reports), Torch's version comes from installed metadata for kernels' own variant
# decision (`_resolve_variant_for_system`), and the user agent goes without torch's version.
UNLOCKED_CHILD = """
import json, platform, sys, time
start = time.perf_counter()
import kernels
from kernels._internals import backends, hf_hub, resolver, variants
from packaging.version import Version
from kernlock._internal.host import current_target
torch_version = Version(".".join(map(str, current_target().torch)))
backends._backend = backends.CPU
hf_hub.has_torch = False
def resolve_variant(found, backend=None):
    chosen, trace = variants._resolve_variant_for_system(
        variants=found, selected_backend=backends.CPU(), cpu=platform.machine(), os="linux", torch_version=torch_version,
        torch_cxx11_abi=True, tvm_ffi_version=None, macos_version=None, free_threaded=False, has_mlx=False,
        python_version=Version(f"{sys.version_info.major}.{sys.version_info.minor}"))
    return (chosen[0] if chosen else None), trace
resolver.resolve_variant = resolve_variant
for repo in sys.argv[1:]:
    kernels.install_kernel(repo, version=1, trust_remote_code=True)
assert "torch" not in sys.modules
print("BENCH " + json.dumps({"ready_ms": (time.perf_counter() - start) * 1000}))
"""

REAL_GET_KERNEL = """
import sys
import torch, kernels
kernels.get_kernel(sys.argv[1], version=1)
"""

GUARD_CHILD = """
import json, os, sys, time
import torch.distributed as dist
import kernlock
import kernlock._internal.runtime.rank_guard as guard
kernlock.apply()
spent = []
original = guard.check_ranks
def timed(*args):
    began = time.perf_counter()
    verdict = original(*args)
    spent.append((time.perf_counter() - began) * 1000)
    return verdict
guard.check_ranks = timed
began = time.perf_counter()
dist.init_process_group("gloo")
init_ms = (time.perf_counter() - began) * 1000
dist.destroy_process_group()
print("BENCH " + json.dumps({"guard_ms": spent[0], "init_ms": init_ms}))
"""


def _start_at_once(argvs: list[list[str]], env: dict[str, str], cwd: Path, hub: TestHub | None) -> dict:
    """Start every process at once, wait for all; wall time, each process's own figures, and the Hub's counts."""
    if hub is not None:
        hub.reset_counts()
    began = time.perf_counter()
    procs = [subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in argvs]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    wall = time.perf_counter() - began
    failed = [(proc.returncode, err[-1500:]) for proc, (_, err) in zip(procs, outputs, strict=True) if proc.returncode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(procs)} processes failed; first: {failed[0]}")
    data = [json.loads(line[6:]) for out, _ in outputs for line in out.splitlines() if line.startswith("BENCH ")]
    counts = {"wall_s": round(wall, 2), "data": data}
    if hub is not None:
        log = list(hub.log)
        counts.update(requests=len(log), by_kind=dict(hub.requests), rate_limited=hub.fired.get("429", 0))
    return counts


def _cold_start(ws: Workspace, result: Result) -> None:
    repos = ws.repos(1)
    repo = next(iter(repos))
    project = ws.path("cluster-project")
    with running_hub(repos, LATENCY) as hub:
        lock_project(project, [repo], hub, child_env(hub, ws.path("hf-home")))
        hub.rate_limits = dict(RATE_LIMITS)  # the Hub's anonymous quotas per 5-minute window, from here on
        lock = load_lockfile(project / "kernels.lock")
        files = sum(len(k.variants[0].files) for k in lock.kernels)
        variant_files = {len(v.files) for k in lock.kernels for v in k.variants}
        assert len(variant_files) == 1
        locked_env = child_env(hub, ws.path("hf-home-locked"), KERNLOCK_LOCKFILE=str(project / "kernels.lock"))
        runs = {
            "locked": _start_at_once([[PYTHON, "-c", LOCKED_CHILD]] * PROCESSES, locked_env, project, hub),
            "unlocked": _start_at_once([[PYTHON, "-c", UNLOCKED_CHILD, repo]] * PROCESSES,
                                       child_env(hub, ws.path("hf-home-unlocked")), project, hub),
            "unlocked, 1 process": _start_at_once([[PYTHON, "-c", UNLOCKED_CHILD, repo]],
                                                  child_env(hub, ws.path("hf-home-one")), project, hub),
            "locked, 1 process": _start_at_once([[PYTHON, "-c", LOCKED_CHILD]],
                                                child_env(hub, ws.path("hf-home-one-locked"),
                                                          KERNLOCK_LOCKFILE=str(project / "kernels.lock")),
                                                project, hub),
            "real get_kernel (torch), 1 process": _start_at_once([[PYTHON, "-c", REAL_GET_KERNEL, repo]],
                                                                 child_env(hub, ws.path("hf-home-real")), project, hub),
        }
    for case, run in runs.items():
        ready = [d["ready_ms"] for d in run["data"]]
        api = sum(n for kind, n in run["by_kind"].items() if kind not in ("resolve", "cdn"))
        result.rows.append({
            "cold start, 50 ms": case, "processes": len(ready) or 1, "wall_s": run["wall_s"],
            "slowest_ready_ms": round(max(ready), 0) if ready else "-",
            "median_ready_ms": round(median(ready), 0) if ready else "-",
            "requests": run["requests"], "api_calls": api, "requests_by_kind": kinds(run["by_kind"]),
            "429s": run["rate_limited"],
        })
        result.data[case] = {k: v for k, v in run.items() if k != "data"} | {"ready_ms": ready}
    locked, unlocked = runs["locked"], runs["unlocked"]
    real, replay = runs["real get_kernel (torch), 1 process"], runs["unlocked, 1 process"]
    unlocked_api = sum(n for kind, n in unlocked["by_kind"].items() if kind not in ("resolve", "cdn"))
    locked_hub = locked["requests"] - locked["by_kind"].get("cdn", 0)  # CDN fetches after a /resolve/ redirect
    result.notes.append(
        f"{PROCESSES} processes, one kernel whose locked variant has {files} files. Unlocked: {unlocked_api} API calls "
        f"= {unlocked_api / PROCESSES:g} per process per start ({unlocked_api / RATE_LIMITS['api']:.0%} of the anonymous "
        f"{RATE_LIMITS['api']}-call 5-minute quota); locked: {locked_hub} Hub requests in all "
        f"(+{locked['requests'] - locked_hub} CDN fetches), {sum(n for kind, n in locked['by_kind'].items() if kind not in ('resolve', 'cdn'))} API calls.")
    result.notes.append(f"the test Hub enforces the anonymous quotas per 5-minute window ({RATE_LIMITS}) during "
                        "the runs; 429s counts its rate-limited answers")
    # huggingface_hub's own agent-registry lookups are shared through its cache, racily: not kernlock's requests
    def own(run: dict) -> int:
        return run["requests"] - run["by_kind"].get("agent-registry", 0)

    single = own(runs["locked, 1 process"])
    result.targets.append(Target(f"cluster: locked cold start, file requests for {PROCESSES} processes",
                                 own(locked), f"== {single} (those of 1 process: per file, not per rank)",
                                 own(locked) == single))
    extra = {k: n - replay["by_kind"].get(k, 0) for k, n in real["by_kind"].items() if n != replay["by_kind"].get(k, 0)}
    result.notes.append(f"a real get_kernel also makes {kinds(extra)} (kernels' trust check) per process: "
                        f"{unlocked_api / PROCESSES + sum(extra.values()):g} API calls per rank per start")
    one = runs["locked, 1 process"]["data"][0]["ready_ms"]
    slowest = max(d["ready_ms"] for d in locked["data"])
    result.data["locked_slowest_over_one_ms"] = round(slowest - one, 0)


def _guard(ws: Workspace, result: Result, jobs: int) -> None:
    repos = ws.repos(1)
    project = ws.path("guard-project")
    with running_hub(repos) as hub:
        lock_project(project, list(repos), hub, child_env(hub, ws.path("hf-home-guard")))
    guard, init = [], []
    for _ in range(jobs):  # one process-group init per job, as a training job does
        env = child_env(None, ws.path("hf-home-guard2"), KERNLOCK_LOCKFILE=str(project / "kernels.lock"),
                        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(GUARD_RANKS))
        procs = [[PYTHON, "-c", GUARD_CHILD] for _ in range(GUARD_RANKS)]
        run = _start_ranks(procs, env, project)
        guard.append(max(d["guard_ms"] for d in run))  # the slowest rank of the job
        init.append(max(d["init_ms"] for d in run))
    result.rows.append({
        "guard, gloo loopback": f"{GUARD_RANKS} ranks x {jobs} jobs", "guard_median_ms": round(median(guard), 2),
        "guard_max_ms": round(max(guard), 2), "init_process_group_median_ms": round(median(init), 2),
    })
    result.data["guard"] = {"guard_ms": guard, "init_ms": init}
    result.targets.append(Target(f"cluster: guard per process-group init, {GUARD_RANKS} ranks (median, slowest rank)",
                                 round(median(guard), 2), "<= 50 ms", median(guard) <= 50))


def _start_ranks(argvs: list[list[str]], env: dict[str, str], cwd: Path) -> list[dict]:
    procs = [subprocess.Popen(argv, cwd=cwd, env={**env, "RANK": str(rank)}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank, argv in enumerate(argvs)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    failed = [err[-1500:] for proc, (_, err) in zip(procs, outputs, strict=True) if proc.returncode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} ranks failed; first: {failed[0]}")
    return [json.loads(line[6:]) for out, _ in outputs for line in out.splitlines() if line.startswith("BENCH ")]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _registry_module() -> ModuleType:
    """tests/registry.py (the suite's CNCF registry fixture code), loaded by path: benchmarks reuse it."""
    path = Path(__file__).resolve().parent.parent / "tests" / "registry.py"
    spec = importlib.util.spec_from_file_location("kernlock_suite_registry", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _registry_requests(log: Path) -> int:
    """Requests the registry answered so far: its access log writes one line per request."""
    return len(_ACCESS_LINE.findall(log.read_text(errors="replace")))


def _nodes_at_once(argv: list[str], homes: list[Path], env: dict[str, str], cwd: Path, hub: TestHub,
                   log: Path) -> dict:
    """Start one process per HF_HOME at once and wait for all: wall time, failures, Hub and registry requests."""
    hub.reset_counts()
    before = _registry_requests(log)
    began = time.perf_counter()
    procs = [subprocess.Popen(argv, cwd=cwd, env={**env, "HF_HOME": str(home), "KERNLOCK_STATE_DIR": str(home / "s")},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for home in homes]
    outputs = [proc.communicate(timeout=900) for proc in procs]
    wall = time.perf_counter() - began
    failed = [err.strip().splitlines()[-1:] for proc, (_, err) in zip(procs, outputs, strict=True) if proc.returncode != 0]
    return {"wall_s": round(wall, 2), "failures": len(failed), "first_failure": failed[0] if failed else None,
            "hub_requests": sum(hub.requests.values()), "hub_by_kind": dict(hub.requests),
            "hub_429s": hub.fired.get("429", 0), "registry_requests": _registry_requests(log) - before}


def _nodes(ws: Workspace, result: Result, sizes: tuple[int, ...]) -> None:
    registry = _registry_module()
    if registry.registry_binary() is None:
        result.notes.append(f"nodes: skipped, {registry.MISSING}")
        return
    repo = next(iter(ws.repos(1)))
    project = ws.path("nodes-project")
    with running_hub(ws.repos(1), LATENCY) as hub, registry.running_registry(ws.path("registry")) as running:
        env = child_env(hub, ws.path("hf-home-nodes"))
        lock_project(project, [repo], hub, env, targets=[CPU_TARGET])
        url = running.url("team/kernels:v1")
        probed = _registry_requests(running.log)  # the fixture's readiness probe
        vendor = run_child([PYTHON, "-m", "kernlock", "vendor", "--to", url], hub, env, cwd=project)
        pushed = _registry_requests(running.log) - probed
        lock = load_lockfile(project / "kernels.lock")
        files = sum(len(v.files) for k in lock.kernels for v in k.variants)
        hub.rate_limits, hub.rate_window = dict(NODE_RATE_LIMITS), NODE_RATE_WINDOW
        sources = {"Hub": [], "registry": ["--from", url]}
        for n in sizes:
            for source, extra in sources.items():
                hub._windows.clear()  # each run starts with a fresh quota window
                homes = [ws.path(f"node-{source}-{n}-{i}") for i in range(n)]
                argv = [PYTHON, "-m", "kernlock", "sync", *extra]
                run = _nodes_at_once(argv, homes, env, project, hub, running.log)
                result.rows.append({"cold nodes, kernlock sync": source, "N": n, "hub_requests": run["hub_requests"],
                                    "registry_requests": run["registry_requests"], "wall_s": run["wall_s"],
                                    "failures": run["failures"], "429s": run["hub_429s"],
                                    "hub_by_kind": kinds(run["hub_by_kind"])})
                result.data[f"nodes {source} {n}"] = run
    result.notes.append(
        f"nodes: 1 kernel x 1 target ({files} files), test Hub at {LATENCY * 1000:.0f} ms/request with a 429 quota of "
        f"{NODE_RATE_LIMITS} per {NODE_RATE_WINDOW:g} s window (fresh window per run); one `kernlock vendor --to "
        f"oci://127.0.0.1:PORT/team/kernels:v1` made {vendor.requests} Hub requests and {pushed} registry requests")
    flat = {n: result.data[f"nodes registry {n}"]["hub_requests"] for n in sizes}
    result.targets.append(Target(f"cluster: Hub requests of N cold nodes syncing from the registry, N = {sizes}",
                                 flat, "flat in N", len(set(flat.values())) == 1))
    ok = all(result.data[f"nodes {s} {n}"]["failures"] == 0 for s in sources for n in sizes)
    result.targets.append(Target("cluster: cold nodes that failed", sum(
        result.data[f"nodes {s} {n}"]["failures"] for s in sources for n in sizes), "0", ok))


def run(ws: Workspace, quick: bool) -> Result:
    result = Result(NAME)
    _nodes(ws, result, NODES[:2] if quick else NODES)
    _guard(ws, result, jobs=2 if quick else 5)
    _cold_start(ws, result)
    return result
