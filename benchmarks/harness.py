"""Shared machinery: synthetic kernel repos, a test Hub with latency, child processes, medians.

Everything a benchmark touches lives under one temporary work directory
(`Workspace`); nothing is written into the checkout.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant, Lockfile
from kernlock._internal.spec.target import parse_target
from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir
from kernlock.testing.hub import TestHub

PYTHON = sys.executable
KERNELS_CLI = str(Path(sys.executable).with_name("kernels"))
KERNLOCK_CLI = str(Path(sys.executable).with_name("kernlock"))
ORG = "kernels-community"  # a trusted publisher on the test Hub, so neither tool refuses the kernels
CPU_TARGET = "torch2.13-cxx11-cpu-x86_64-linux"
CUDA_TARGET = "torch2.12-cxx11-cu128-x86_64-linux"

# ~15 build variants per commit, as on real kernel repos; the CPU one is what loads here.
VARIANTS = (
    "torch29-cxx11-cu126-x86_64-linux",
    "torch29-cxx11-cu128-x86_64-linux",
    "torch29-cxx11-cu128-aarch64-linux",
    "torch210-cxx11-cu126-x86_64-linux",
    "torch210-cxx11-cu128-x86_64-linux",
    "torch210-cxx11-cu128-aarch64-linux",
    "torch211-cxx11-cu128-x86_64-linux",
    "torch211-cxx11-cu130-x86_64-linux",
    "torch212-cxx11-cu128-x86_64-linux",
    "torch212-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch211-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-cpu-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux",
    "torch213-cxx11-rocm64-x86_64-linux",
)

# Variables that would point a child process somewhere other than the test Hub and its fresh cache.
_UNSET_ENV = (
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE", "HF_HUB_DISABLE_TELEMETRY", "KERNELS_CACHE", "LOCAL_KERNELS", "HF_TOKEN_PATH",
    "HF_XET_CACHE", "KERNLOCK_LOCKFILE", "KERNLOCK_APPLY", "KERNLOCK_STRICT",
)


def kernel_repo(index: int) -> str:
    return f"{ORG}/bench-k{index:03d}"


def kernel_module(repo: str) -> str:
    return repo.split("/")[1].replace("-", "_")


# ---------------------------------------------------------------- synthetic repos


def write_fixtures(directory: Path, count: int, variants: Sequence[str] = VARIANTS, commits: int = 2,
                   signed: bool = False) -> list[str]:
    """Fixture TOMLs for `count` kernels (branch v1, also main) reusing the checkout's templates; `signed`: every
    build ships a test Sigstore bundle, as kernel-builder's do."""
    directory.mkdir(parents=True, exist_ok=True)
    templates = directory / "templates"
    if not templates.exists():
        templates.symlink_to(default_fixtures_dir() / "templates", target_is_directory=True)
    variant_list = ", ".join(f'"{v}"' for v in variants)
    repos = []
    for index in range(count):
        repo = kernel_repo(index)
        lines = [f'repo = "{repo}"', 'template = "simple"', "", "[variant-sets]", f"all = [{variant_list}]"]
        for n in range(1, commits + 1):
            lines += ["", "[[commits]]", f'label = "{repo} v1 #{n}"', 'branch = "v1"', 'also = ["main"]', 'variants = ["all"]',
                      *(["signed = true"] if signed else [])]
        (directory / f"{repo.replace('/', '__')}.toml").write_text("\n".join(lines) + "\n")
        repos.append(repo)
    return repos


# ---------------------------------------------------------------- projects


def write_project(root: Path, repos: Sequence[str], targets: Sequence[str] = (), version: int = 1) -> Path:
    """A pyproject.toml listing `repos` in `[tool.kernels.dependencies]` (read by both tools)."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ["[project]", 'name = "bench"', 'version = "0"', ""]
    if targets:
        lines += ["[tool.kernlock]", "targets = [" + ", ".join(f'"{t}"' for t in targets) + "]", ""]
    lines += ["[tool.kernels.dependencies]", *(f'"{repo}" = {version}' for repo in repos)]
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return root


def kernlock_lock_argv(project: Path) -> list[str]:
    return [PYTHON, "-m", "kernlock", "lock", "--project", str(project)]


def lock_project(project: Path, repos: Sequence[str], hub: TestHub, env: dict[str, str], targets: Sequence[str] = ()) -> Run:
    """Write a project for `repos` and lock it with `kernlock lock` (in a child process)."""
    write_project(project, repos, targets=targets)
    return run_child(kernlock_lock_argv(project), hub, env)


def bench_targets(count: int) -> list[str]:
    """`count` distinct targets (Torch 2.13 down to 2.9 x cpu/cu126/cu128/cu130), the CPU one here first."""
    found = []
    for minor in range(13, 8, -1):
        for backend in ("cpu", "cu126", "cu128", "cu130"):
            found.append(f"torch2.{minor}-cxx11-{backend}-x86_64-linux")
    assert count <= len(found)
    return found[:count]


def synthetic_lock(repos: Sequence[str], variants: int, files: int = 4) -> Lockfile:
    """A lock of `repos` (spec `repo@v1`), each with one variant per target of `bench_targets(variants)`."""
    targets = bench_targets(variants)
    kernels = []
    for repo in repos:
        commit = hashlib.sha1(repo.encode()).hexdigest()
        locked = []
        for target in targets:
            name = target.replace("torch2.", "torch2").replace(".", "")
            paths = ["metadata.json", *(f"{kernel_module(repo)}/file{n}.py" for n in range(files - 2)),
                     f"{kernel_module(repo)}/_ops.so"][:files]
            entries = tuple(LockedFile(path=path, sha256=hashlib.sha256(f"{repo}/{name}/{path}".encode()).hexdigest(), size=1000 + n)
                            for n, path in enumerate(sorted(paths)))
            locked.append(LockedVariant(name=name, targets=(parse_target(target),), files=entries))
        kernels.append(LockedKernel(
            spec=f"{repo}@v1", repo=repo, commit=commit, resolution="version 1 → branch v1", trust="trusted-publisher",
            requested=(f"{repo}@v1",), version=1, ref="v1", build_variants=tuple(sorted(v.name for v in locked)),
            variants=tuple(sorted(locked, key=lambda v: v.name)),
        ))
    return Lockfile(targets=tuple(parse_target(t) for t in sorted(targets)), inputs=tuple(sorted(k.spec for k in kernels)),
                    kernels=tuple(kernels), resolved_with={"kernlock": "0.1.0"})


# ---------------------------------------------------------------- the workspace


def compile_kernlock() -> None:
    """Byte-compile kernlock (an editable install has no .pyc) so no child pays for compiling it."""
    import compileall

    import kernlock

    compileall.compile_dir(str(Path(kernlock.__file__).parent), quiet=1)


class Workspace:
    """A temporary directory holding fixture repos, projects and fresh HF_HOMEs."""

    def __init__(self, keep: bool = False) -> None:
        compile_kernlock()
        self.root = Path(tempfile.mkdtemp(prefix="kernlock-bench-"))
        os.environ["KERNLOCK_CACHE_DIR"] = str(self.root / "kernlock-cache")  # never the user's parse cache
        self.keep = keep
        self._counter = 0
        self._repos: dict[tuple[int, bool], dict[str, Path]] = {}

    def path(self, name: str) -> Path:
        self._counter += 1
        path = self.root / f"{self._counter:04d}-{name}"
        path.mkdir(parents=True)
        return path

    def repos(self, count: int, signed: bool = False) -> dict[str, Path]:
        """Bare git repos of the first `count` synthetic kernels (built once, shared); `signed`: with bundles."""
        key = (count, signed)
        if key not in self._repos:
            name = f"{count}{'-signed' if signed else ''}"
            fixtures = self.root / f"fixtures-{name}"
            write_fixtures(fixtures, count, signed=signed)
            self._repos[key] = build_fixture_repos(fixtures, self.root / f"repos-{name}")
        return self._repos[key]

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def running_hub(repos: dict[str, Path], latency: float = 0.0) -> Iterator[TestHub]:
    """A started TestHub whose per-commit caches are already filled (so no tool pays the server's warm-up).

    Real-Hub transport is on (LFS files through the CDN redirect, paginated trees), except
    rate limits: repetitions would use up a window and measure waiting, not the tools.
    """
    with TestHub(repos, latency=latency) as hub:
        hub.rate_limits = None
        _count_bytes_by_kind(hub)
        for repo in hub.repos.values():
            for commit in set(repo.refs().values()):
                repo.entries(commit)
                repo.last_commits(commit)
        yield hub


def _count_bytes_by_kind(hub: TestHub) -> None:
    """Make `hub` also count bytes sent per endpoint kind in `hub.bytes_by_kind` (a handler thread
    records its request's kind, then counts the bytes it sends)."""
    local = threading.local()
    lock = threading.Lock()
    hub.bytes_by_kind = collections.Counter()  # type: ignore[attr-defined]
    record, count = hub._record, hub._count_bytes

    def _record(method: str, path: str, kind: str, *args: Any, **kwargs: Any):
        local.kind = kind
        return record(method, path, kind, *args, **kwargs)

    def _count(n: int, *args: Any, **kwargs: Any) -> None:
        count(n, *args, **kwargs)
        with lock:
            hub.bytes_by_kind[getattr(local, "kind", "other")] += n  # type: ignore[attr-defined]

    hub._record, hub._count_bytes = _record, _count  # type: ignore[method-assign]


def child_env(hub: TestHub | None, hf_home: Path, **extra: str) -> dict[str, str]:
    """The environment of a child process that talks to `hub` (if any) with cache `hf_home`."""
    # Children may write bytecode: with PYTHONDONTWRITEBYTECODE every process would recompile the
    # editable kernlock from source, a cost no installed (wheel) kernlock has.
    env = {k: v for k, v in os.environ.items() if k not in _UNSET_ENV and k != "PYTHONDONTWRITEBYTECODE"}
    # The test Hub lists `xetHash` but runs no Xet server: clients fetch over plain HTTP (via its CDN).
    env.update(HF_HOME=str(hf_home), KERNLOCK_STATE_DIR=str(hf_home / "kernlock-state"), HF_HUB_DISABLE_XET="1")
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    env.update(extra)
    return env


# ---------------------------------------------------------------- measuring


@dataclass
class Run:
    """One measured child process."""

    wall: float
    requests: int
    by_kind: dict[str, int]
    bytes: int
    bytes_by_kind: dict[str, int] = field(default_factory=dict)
    stdout: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""


class ChildFailed(RuntimeError):
    pass


def run_child(argv: Sequence[str], hub: TestHub | None, env: dict[str, str], cwd: Path | None = None,
              timeout: float = 600) -> Run:
    """Run a process to completion, timing it and counting the Hub traffic it caused (if `hub`)."""
    if hub is not None:
        hub.reset_counts()
        hub.bytes_by_kind.clear()  # type: ignore[attr-defined]
    start = time.perf_counter()
    proc = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise ChildFailed(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    data = {}
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            data = json.loads(line[6:])
    if hub is None:
        return Run(wall, 0, {}, 0, {}, proc.stdout, data, proc.stderr)
    return Run(wall, sum(hub.requests.values()), dict(hub.requests), hub.bytes_sent,
               dict(hub.bytes_by_kind), proc.stdout, data, proc.stderr)  # type: ignore[attr-defined]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(runs: Sequence[Run], keys: Sequence[str] = ()) -> dict[str, Any]:
    """Medians over repetitions of wall time (ms), requests, bytes and named child-reported values."""
    out: dict[str, Any] = {
        "reps": len(runs),
        "wall_ms": round(median([r.wall for r in runs]) * 1000, 1),
        "requests": median([r.requests for r in runs]),
        "bytes": median([r.bytes for r in runs]),
        "requests_by_kind": runs[0].by_kind if runs else {},
        "file_bytes": median([r.bytes_by_kind.get("resolve", 0) + r.bytes_by_kind.get("cdn", 0) for r in runs]),
    }
    for key in keys:
        out[key] = round(median([r.data[key] for r in runs]), 2)
    return out


def kinds(counts: dict[str, int]) -> str:
    """`refs=1 tree=2`: a compact count per endpoint kind."""
    return " ".join(f"{kind}={n}" for kind, n in sorted(counts.items())) or "-"


def timeit_times(fn: Callable[[], Any], reps: int) -> list[float]:
    """Seconds of each of `reps` calls of `fn`."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def timeit_median(fn: Callable[[], Any], reps: int) -> float:
    """Median seconds of `reps` calls of `fn`."""
    return median(timeit_times(fn, reps))


def ratio(slow: float, fast: float) -> float:
    return round(slow / fast, 2) if fast else float("inf")


# ---------------------------------------------------------------- reporting


@dataclass
class Target:
    """A figure with a goal: PASS or MISS in the summary."""

    name: str
    value: Any
    goal: str
    ok: bool

    def row(self) -> dict[str, Any]:
        return {"target": self.name, "value": self.value, "goal": self.goal, "status": "PASS" if self.ok else "MISS"}


@dataclass
class Result:
    """What one benchmark returns: table rows, targets and raw data for the JSON."""

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A plain-text table of dict rows (union of keys, in first-seen order)."""
    if not rows:
        return "(no rows)"
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.3e}"
    return str(value)
