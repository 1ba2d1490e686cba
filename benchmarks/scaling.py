"""Benchmark 5 — scaling, in-process.

* Load + validate + coverage check (`lockfile_toml.load_lockfile` + `coverage.require_coverage`)
  of locks of 10, 100 and 1,000 kernels (2 variants x 4 files each), parsed every
  time (parse cache off): median time, per-kernel cost and its growth (flat
  per-kernel cost = linear); then the 1,000-kernel lock again with the parse cache.
* Integrity re-check on a warm start of a variant holding a 256 MB binary
  (`cache.check_variant`): first check (hashes everything) vs the re-check
  that trusts the verified-file stamp (size, mtime, inode unchanged).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from unittest import mock

from benchmarks.harness import (
    Result, Target, Workspace, bench_targets, kernel_module, kernel_repo, median, ratio, synthetic_lock, timeit_median,
    timeit_times,
)
from kernlock._internal.store import hub_cache as cache
from kernlock._internal.model.target import parse_target
from kernlock._internal.lockfile.model import LockedFile, LockedVariant
from kernlock._internal.lockfile.serialize import load_lockfile, write_lockfile
from kernlock._internal.check.coverage import require_coverage

NAME = "scaling"
SIZES = (10, 100, 1000)


def _lock_scaling(ws: Workspace, reps: int, result: Result) -> None:
    target = parse_target(bench_targets(1)[0])
    per_kernel = {}
    for size in SIZES:
        path = ws.path(f"scaling-{size}") / "kernels.lock"
        write_lockfile(synthetic_lock([kernel_repo(i) for i in range(size)], variants=2), path)

        def load_and_check() -> None:
            require_coverage(load_lockfile(path), target, path)

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
    _lock_scaling(ws, 3 if quick else 7, result)
    _integrity(ws, 64 if quick else 256, 1 if quick else 3, result)
    return result
