"""Benchmark — a big variant: `kernlock sync` of a build whose `_ops.so` is 256 MB (flash-attn3 builds are
hundreds of MB) next to `hf_hub_download` of that one file, both into an empty cache over the test Hub's CDN.

Each child reports its own peak RSS. kernlock streams the file through its sha256 into a private temporary
name (resumable, issue 28 item 20) and checks size and hash before the file becomes visible; `hf_hub_download`
of the same file is the anchor. After each run its cache is deleted and the page cache written back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.harness import (
    CPU_TARGET,
    PYTHON,
    ChildFailed,
    Result,
    Target,
    Workspace,
    child_env,
    kernel_module,
    lock_project,
    median,
    ratio,
    running_hub,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import push_build

NAME = "download"
# Each child reports its own peak RSS (VmHWM of its address space since exec) at exit: rusage's ru_maxrss would
# carry over the benchmark process's, since Linux keeps the forking parent's high-water mark across exec.
PEAK_RSS = ("import atexit, re, runpy, sys\n"
            "def peak():\n"
            "    status = open('/proc/self/status').read()\n"
            "    print('PEAK_RSS_KB', re.search(r'VmHWM:\\s*(\\d+)', status)[1], file=sys.stderr)\n"
            "atexit.register(peak)\n"
            "if sys.argv[1] == '-c':\n"
            "    code, sys.argv = sys.argv[2], ['-c', *sys.argv[3:]]\n"
            "    exec(compile(code, '<string>', 'exec'), {'__name__': '__main__'})\n"
            "else:\n"
            "    sys.argv = sys.argv[1:]\n"
            "    runpy.run_module(sys.argv[0], run_name='__main__')\n")
HF_HUB_DOWNLOAD = ("import sys\nfrom huggingface_hub import hf_hub_download\n"
                   "hf_hub_download(sys.argv[1], sys.argv[2], revision=sys.argv[3], repo_type='kernel')\n")
def _measured(module_argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    """Run `python -m MODULE ARGS…` (or `-c CODE ARGS…`) to completion; its wall time (s) and its own peak RSS (bytes)."""
    start = time.perf_counter()
    proc = subprocess.run([PYTHON, "-c", PEAK_RSS, *module_argv], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise ChildFailed(f"{' '.join(module_argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    [peak] = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("PEAK_RSS_KB ")]
    return wall, int(peak) * 1024


def _big_build(repo: str, repo_path: Path, megabytes: int) -> int:
    """Push a rebuild of the CPU variant whose `_ops.so` holds `megabytes` MB of incompressible bytes."""
    size = megabytes << 20
    blob = os.urandom(1 << 20) * (size >> 20)  # incompressible per MB; git stores it as one blob
    variant = f"build/{CPU_TARGET.replace('torch2.13', 'torch213')}"
    push_build(repo_path, "v1", {f"{variant}/{kernel_module(repo)}/_ops.so": blob}, f"A {megabytes} MB build")
    return size


def run(ws: Workspace, quick: bool) -> Result:
    megabytes, reps = (64, 1) if quick else (256, 7)
    result = Result(NAME)
    [(repo, shared)] = ws.repos(1).items()
    repo_path = ws.path("download-repo") / shared.name
    shutil.copytree(shared, repo_path)
    size = _big_build(repo, repo_path, megabytes)
    project = ws.path("download-project")
    with running_hub({repo: repo_path}) as hub:
        lock_project(project, [repo], hub, child_env(hub, ws.path("download-lock-home")))
        lock = load_lockfile(project / "kernels.lock")
        kernel = lock.kernels[0]
        variant = kernel.variant_for(lock.targets[0])
        assert variant is not None
        [big] = [f for f in variant.files if f.size == size]
        cases = {
            "kernlock sync (whole variant)": ["kernlock", "sync"],
            "hf_hub_download (the one file)": ["-c", HF_HUB_DOWNLOAD, repo, f"build/{variant.name}/{big.path}",
                                              kernel.commit],
        }
        runs: dict[str, list[tuple[float, int]]] = {case: [] for case in cases}
        for _ in range(reps):  # alternating, each into an empty cache: drift on a noisy machine hits both alike
            for case, argv in cases.items():
                home = ws.path("download-home")
                runs[case].append(_measured(argv, child_env(hub, home), project))
                shutil.rmtree(home)  # and write back what is dirty: no run pays for the one before
                os.sync()
        figures: dict[str, tuple[float, int]] = {}
        for case in cases:
            wall, rss = median([w for w, _ in runs[case]]), int(median([r for _, r in runs[case]]))
            figures[case] = (wall, rss)
            result.rows.append({"case": case, "reps": reps, "file_MB": megabytes, "median_ms": round(wall * 1000),
                                "peak_rss_MB": round(rss / (1 << 20), 1)})
    (sync_wall, sync_rss), (hf_wall, hf_rss) = figures.values()
    time_ratio, rss_ratio = round(sync_wall / hf_wall, 2), round(sync_rss / hf_rss, 2)
    result.data.update(megabytes=megabytes, sync_ms=sync_wall * 1000, hf_hub_download_ms=hf_wall * 1000,
                       sync_rss=sync_rss, hf_hub_download_rss=hf_rss, time_ratio=time_ratio, rss_ratio=rss_ratio)
    result.notes.append(f"{megabytes} MB: kernlock sync takes {time_ratio}x the time and {rss_ratio}x the peak RSS of "
                        f"hf_hub_download (speed-up {ratio(hf_wall, sync_wall)}x)")
    if not quick:
        result.targets.append(Target(f"download: kernlock sync of a {megabytes} MB variant, time / hf_hub_download",
                                     time_ratio, "< 1 (last round: 0.76)", time_ratio < 1))
        result.targets.append(Target(f"download: kernlock sync of a {megabytes} MB variant, peak RSS / hf_hub_download",
                                     rss_ratio, "<= 0.5 (last round: 0.5)", rss_ratio <= 0.5))
    return result

