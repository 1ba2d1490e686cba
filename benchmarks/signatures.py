"""Benchmark 5 — what verifying Sigstore signatures costs `kernlock lock`.

Per bundle, in a fresh process: the first verification (importing sigstore, reading the pinned
`trusted_root.json`, building the `Verifier`) and the next ones (median), for a test Sigstore bundle
against its root and for sigstore-python's production GitHub Actions bundle against the production
root shipped in the sigstore package. Then `kernlock lock` of the same synthetic kernels (~15 build
variants each, two targets locked) with and without a bundle on every build, against the test Hub,
next to `kernels lock` on the signed ones (it verifies nothing), in fresh processes with fresh caches.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.harness import (
    CPU_TARGET,
    CUDA_TARGET,
    KERNELS_CLI,
    PYTHON,
    Result,
    Target,
    Workspace,
    child_env,
    kernlock_lock_argv,
    median,
    ratio,
    run_child,
    running_hub,
    write_project,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.rules.signatures import TRUSTED_ROOT_ENV
from kernlock.testing.sigstore import TestSigstore

NAME = "signatures"
TARGETS = (CPU_TARGET, CUDA_TARGET)
ASSETS = Path(__file__).resolve().parent.parent / "fixtures" / "sigstore"
BUNDLE_GOAL_MS = 5.0  # per verification after the first
FIRST_GOAL_MS = 500.0  # the first one in a process, sigstore's import included
SPEEDUP_GOAL = 5.0  # the lock benchmark's target, now with every build signed

# Run in a child: time the first verification (sigstore imported by it) and `reps` more, print BENCH json.
_PER_BUNDLE = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from kernlock._internal.rules.signatures import verify_bundle
artifact, bundle, root, reps = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]).read_bytes(), Path(sys.argv[3]), int(sys.argv[4])
verify_bundle(artifact, bundle, root)
first = time.perf_counter() - t0
times = []
for _ in range(reps):
    t = time.perf_counter()
    verify_bundle(artifact, bundle, root)
    times.append(time.perf_counter() - t)
print("BENCH " + json.dumps({"first_ms": first * 1000, "next_ms": sorted(times)[len(times) // 2] * 1000}))
"""


def _per_bundle(ws: Workspace, reps: int) -> dict[str, dict[str, float]]:
    """First and next verification times (ms) of a test Sigstore bundle and of a production one."""
    from kernlock._internal.rules.signatures import production_trusted_root

    sigstore, work = TestSigstore(), ws.path("signatures-bundles")
    artifact = work / "metadata.json"
    artifact.write_bytes(b'{"name": "bench", "id": "bench_0000000"}\n')
    (work / "metadata.json.sigstore").write_bytes(sigstore.sign(artifact.read_bytes()))
    cases = {
        "test Sigstore bundle": (artifact, work / "metadata.json.sigstore", sigstore.write_trusted_root(work / "root.json")),
        "production bundle (GitHub Actions)": (ASSETS / "bundle_v3_github.whl", ASSETS / "bundle_v3_github.whl.sigstore",
                                               production_trusted_root()),
    }
    env = child_env(None, ws.path("signatures-hf-home"))
    return {name: run_child([PYTHON, "-c", _PER_BUNDLE, *map(str, paths), str(reps)], None, env).data
            for name, paths in cases.items()}


def run(ws: Workspace, quick: bool) -> Result:
    size, reps, bundle_reps = (10, 1, 20) if quick else (10, 3, 200)
    result = Result(NAME)
    for name, times in _per_bundle(ws, bundle_reps).items():
        first, following = round(times["first_ms"], 1), round(times["next_ms"], 2)
        result.rows.append({"measure": f"verify one bundle: {name}", "first_ms": first, "next_ms": following})
        result.data[name] = times
        result.targets.append(Target(f"signatures: {name}, each after the first (ms)", following,
                                     f"<= {BUNDLE_GOAL_MS}", following <= BUNDLE_GOAL_MS))
        result.targets.append(Target(f"signatures: {name}, first in a process (ms, sigstore import included)", first,
                                     f"<= {FIRST_GOAL_MS:g}", first <= FIRST_GOAL_MS))
    root = TestSigstore().write_trusted_root(ws.path("signatures-root") / "trusted_root.json")
    for latency in (0.0, 0.05):
        walls: dict[str, float] = {}
        for signed in (False, True):
            with running_hub(ws.repos(size, signed=signed), latency) as hub:
                commands = {"kernels lock": lambda p: [KERNELS_CLI, "lock", str(p)], "kernlock lock": kernlock_lock_argv}
                for tool, argv in commands.items():
                    if tool == "kernels lock" and not signed:
                        continue  # the anchor, once: it never reads a bundle
                    runs, project = [], None
                    for _ in range(reps):
                        project = write_project(ws.path("signatures-project"), list(hub.repos), targets=TARGETS)
                        env = child_env(hub, ws.path("signatures-lock-home"), **{TRUSTED_ROOT_ENV: str(root)})
                        runs.append(run_child(argv(project), hub, env).wall * 1000)
                    label = f"{tool}, {'signed' if signed else 'unsigned'} builds"
                    walls[label] = round(median(runs), 1)
                    verified = 0
                    if tool == "kernlock lock":
                        lock = load_lockfile(project / "kernels.lock")
                        verified = sum(v.signature is not None for k in lock.kernels for v in k.variants)
                    result.rows.append({"measure": f"{label}, {size} kernels, {int(latency * 1000)} ms latency",
                                        "reps": reps, "median_ms": walls[label], "signatures_verified": verified})
        added = round(walls["kernlock lock, signed builds"] - walls["kernlock lock, unsigned builds"], 1)
        result.data[f"{int(latency * 1000)}ms"] = {"walls_ms": walls, "signatures_added_ms": added}
        result.notes.append(f"{int(latency * 1000)} ms latency: signatures add {added} ms to `kernlock lock` of "
                            f"{size} kernels x {len(TARGETS)} targets ({size * len(TARGETS)} bundles verified)")
        if latency:
            speedup = ratio(walls["kernels lock, signed builds"], walls["kernlock lock, signed builds"])
            result.targets.append(Target(f"lock {size} signed kernels @50ms: kernlock (verifying) speedup vs kernels lock",
                                         speedup, f">= {SPEEDUP_GOAL:g}x", speedup >= SPEEDUP_GOAL))
    result.data["bundle_reps"] = bundle_reps
    return result
