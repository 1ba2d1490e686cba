"""Benchmark 5 — scaling, in-process.

* Load + validate + coverage check (`lockfile_toml.load_lockfile` + `coverage.require_coverage`)
  of locks of 10, 100 and 1,000 kernels (2 variants x 4 files each), parsed every
  time (parse cache off): median time, per-kernel cost and its growth (flat
  per-kernel cost = linear); then the 1,000-kernel lock again with the parse cache.
* `kernlock lock` at scale (issue 47 item 6): 50, 200 and 500 kernels x 20 targets against the test Hub at
  50 ms a request, fixture repos generated at benchmark time with one build variant per target; per size the
  lock's wall time, Hub requests and peak RSS (fresh process, fresh HF_HOME), then `kernlock verify` of that lock
  (median of fresh processes, next to `python -c pass`).
* Integrity re-check on a warm start of a variant holding a 256 MB binary
  (`cache.check_variant`): first check (hashes everything) vs the re-check
  that trusts the verified-file stamp (size, mtime, inode unchanged).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from unittest import mock

from benchmarks.download import _measured
from benchmarks.harness import (
    PYTHON,
    Result,
    Target,
    Workspace,
    bench_targets,
    child_env,
    kernel_module,
    kernel_repo,
    median,
    ratio,
    run_child,
    running_hub,
    synthetic_lock,
    timeit_median,
    timeit_times,
    write_fixtures,
    write_project,
)
from kernlock._internal.lockfile.entries import LockedFile, LockedVariant
from kernlock._internal.lockfile.serialize import load_lockfile, write_lockfile
from kernlock._internal.rules.coverage import require_coverage
from kernlock._internal.spec.target import parse_target
from kernlock._internal.store import hub_cache as cache
from kernlock.testing.fixtures import build_fixture_repos

NAME = "scaling"
SIZES = (10, 100, 1000)
LOCK_SIZES = (50, 200, 500)
LOCK_TARGETS = 20
LATENCY_MS = 50


def _variant_name(target: str) -> str:
    """The build variant name of a target string (`torch2.13-cxx11-cpu-…` -> `torch213-cxx11-cpu-…`)."""
    return target.replace("torch2.", "torch2", 1)


def _lock_at_scale(ws: Workspace, sizes: tuple[int, ...], reps: int, result: Result) -> None:
    targets = bench_targets(LOCK_TARGETS)
    fixtures = ws.path("lock-scale-fixtures")
    write_fixtures(fixtures, max(sizes), variants=[_variant_name(t) for t in targets], commits=1)
    repos_all = build_fixture_repos(fixtures, ws.path("lock-scale-repos"))  # one build variant per target
    per_kernel = {}
    for size in sizes:
        repos = {repo: repos_all[repo] for repo in list(repos_all)[:size]}
        project = write_project(ws.path(f"lock-scale-{size}"), list(repos), targets=targets)
        with running_hub(repos, LATENCY_MS / 1000) as hub:
            env = child_env(hub, ws.path("hf-home-scale"))
            hub.reset_counts()
            wall, peak = _measured(["kernlock", "lock", "--project", str(project)], env, project)
            requests = sum(hub.requests.values())
        verify = [run_child([PYTHON, "-m", "kernlock", "verify"], None, env, cwd=project).wall * 1000
                  for _ in range(reps)]
        python = [run_child([PYTHON, "-c", "pass"], None, env, cwd=project).wall * 1000 for _ in range(reps)]
        per_kernel[size] = wall / size
        result.rows.append({"case": f"kernlock lock, {size} kernels x {LOCK_TARGETS} targets @{LATENCY_MS} ms",
                            "lock_s": round(wall, 2), "requests": requests, "per_kernel": round(requests / size, 2),
                            "peak_rss_MB": round(peak / (1 << 20), 1), "verify_ms": round(median(verify), 1),
                            "python_pass_ms": round(median(python), 1),
                            "lock_bytes": (project / "kernels.lock").stat().st_size})
        result.data[f"lock-scale-{size}"] = {"lock_s": wall, "requests": requests, "by_kind": dict(hub.requests),
                                             "peak_rss": peak, "verify_ms": verify, "python_pass_ms": python}
    growth = ratio(per_kernel[sizes[-1]], per_kernel[sizes[0]])
    result.data["lock_time_per_kernel_growth"] = growth
    result.targets.append(Target(f"scaling: kernlock lock time per kernel at {sizes[-1]} / at {sizes[0]} kernels "
                                 "(linear = 1)", growth, "<= 1.5", growth <= 1.5))



def _lock_scaling(ws: Workspace, reps: int, result: Result) -> None:
    target = parse_target(bench_targets(1)[0])
    per_kernel = {}
    for size in SIZES:
        path = ws.path(f"scaling-{size}") / "kernels.lock"
        write_lockfile(synthetic_lock([kernel_repo(i) for i in range(size)], variants=2), path)

        def load_and_check() -> None:  # timed within this iteration: `path` is this size's lock
            require_coverage(load_lockfile(path), target, path)  # noqa: B023

        n = max(reps, reps * 1000 // size)  # small locks: more repetitions, same total time
        with mock.patch.dict(os.environ, KERNLOCK_NO_CACHE="1"):  # the parse is what scales; the cache row follows
            times = timeit_times(load_and_check, n)
        seconds = median(times)
        per_kernel[size] = min(times) / size  # growth from the minimum: least disturbed by other load
        result.rows.append({"case": f"load+validate+coverage, {size} kernels", "reps": n,
                            "median_ms": round(seconds * 1000, 2), "min_ms": round(min(times) * 1000, 2),
                            "per_kernel_us": round(per_kernel[size] * 1e6, 1), "lock_bytes": path.stat().st_size})
        result.data[f"lock-{size}"] = {"median_ms": seconds * 1000, "min_ms": min(times) * 1000,
                                       "per_kernel_us_min": per_kernel[size] * 1e6}
        if size == SIZES[-1]:
            result.targets.append(Target(f"scaling: load+validate+coverage of {size} kernels (ms)",
                                         round(seconds * 1000, 1), "< 1000 ms", seconds < 1))
            cached = timeit_times(load_and_check, n)  # the first call fills the parse cache
            result.rows.append({"case": f"the same, {size} kernels, parse cache warm", "reps": n,
                                "median_ms": round(median(cached) * 1000, 2), "min_ms": round(min(cached) * 1000, 2),
                                "per_kernel_us": round(min(cached) / size * 1e6, 1), "lock_bytes": path.stat().st_size,
                                "speedup": ratio(seconds, median(cached))})
    growth = ratio(per_kernel[SIZES[-1]], per_kernel[SIZES[1]])
    result.data["per_kernel_growth_100_to_1000"] = growth
    result.targets.append(Target("scaling: per-kernel cost (min) at 1,000 / at 100 kernels (linear = 1)", growth, "<= 1.5",
                                 growth <= 1.5))


def _write_binary(path: Path, size: int) -> str:
    """Write `size` bytes of incompressible data; return their sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = os.urandom(1 << 20)
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        for _ in range(size >> 20):
            out.write(chunk)
            digest.update(chunk)
    return digest.hexdigest()


def _integrity(ws: Workspace, megabytes: int, reps: int, result: Result) -> None:
    lock = synthetic_lock([kernel_repo(0)], variants=1, files=0)
    kernel = lock.kernels[0]
    name = kernel.variants[0].name
    root = cache.variant_dir(kernel, name, ws.path("scaling-cache"))
    binary = f"{kernel_module(kernel.repo)}/_ops.so"
    digest = _write_binary(root / binary, megabytes << 20)
    variant = LockedVariant(name=name, targets=kernel.variants[0].targets,
                            files=(LockedFile(path=binary, sha256=digest, size=megabytes << 20),))

    def unstamped() -> None:
        cache.check_variant(kernel, variant, root)

    def stamped() -> None:
        cache.check_variant(kernel, variant, root, stamped=True)

    first = timeit_median(unstamped, reps)
    stamped()  # writes the stamp
    again = timeit_median(stamped, max(reps, 20))
    speedup = ratio(first, again)
    result.rows.append({"case": f"check_variant {megabytes} MB, no stamp (hash)", "reps": reps,
                        "median_ms": round(first * 1000, 2)})
    result.rows.append({"case": f"check_variant {megabytes} MB, stamped re-check", "reps": max(reps, 20),
                        "median_ms": round(again * 1000, 3), "speedup": speedup})
    result.data["integrity"] = {"megabytes": megabytes, "hash_ms": first * 1000, "stamped_ms": again * 1000,
                                "hash_MB_per_s": round(megabytes / first, 1)}
    result.targets.append(Target(f"scaling: stamped re-check of a {megabytes} MB variant (ms)",
                                 round(again * 1000, 3), "<= 10 ms", again <= 0.010))


def run(ws: Workspace, quick: bool) -> Result:
    result = Result(NAME)
    _lock_at_scale(ws, LOCK_SIZES[:2] if quick else LOCK_SIZES, 3 if quick else 7, result)
    _lock_scaling(ws, 3 if quick else 7, result)
    _integrity(ws, 64 if quick else 256, 1 if quick else 3, result)
    return result
