"""Benchmark — resumable downloads (issue 28 item 20): bytes the CDN sends again after a `kernlock sync`
lost its connection half-way through the `_ops.so`, next to a sync from byte 0.

The first sync's CDN connection is reset after half of the file and then refused (so the run fails and
keeps its partial); the next sync resumes with `Range`/`If-Range`. "restart from 0" is a sync into a
fresh cache: what every re-run sent before resuming existed.
"""

from __future__ import annotations

import contextlib

from benchmarks.harness import (
    KERNLOCK_CLI,
    ChildFailed,
    Result,
    Workspace,
    child_env,
    lock_project,
    run_child,
    running_hub,
)
from kernlock._internal.lockfile.serialize import load_lockfile

NAME = "resume"


def run(ws: Workspace, quick: bool) -> Result:
    result = Result(NAME)
    repos = ws.repos(1)
    repo = next(iter(repos))
    project = ws.path("resume-project")
    with running_hub(repos) as hub:
        lock_project(project, [repo], hub, child_env(hub, ws.path("resume-lock-home")))
        kernel = load_lockfile(project / "kernels.lock").kernels[0]
        variant = kernel.variant_for(load_lockfile(project / "kernels.lock").targets[0])
        assert variant is not None
        so = max((f for f in variant.files if f.path.endswith(".so")), key=lambda f: f.size)
        sync = [KERNLOCK_CLI, "sync"]
        full = run_child(sync, hub, child_env(hub, ws.path("resume-full")), cwd=project)
        full_so = sum(n for p, n in hub.bytes_by_path.items() if so.sha256 in p)
        home = ws.path("resume-cut")
        hub.add_fault("reset", match=so.sha256, after=so.size // 2)
        hub.add_fault("status", match=so.sha256, code=403)
        with contextlib.suppress(ChildFailed):
            run_child(sync, hub, child_env(hub, home), cwd=project)
        hub._faults.clear()
        resumed = run_child(sync, hub, child_env(hub, home), cwd=project)
        resent = sum(n for p, n in hub.bytes_by_path.items() if so.sha256 in p)
        ranges = [r for p, r, _ in hub.ranges if so.sha256 in p]
    result.rows.append({"sync": "restart from 0", "file_bytes": so.size, "bytes_sent": full_so,
                        "process_ms": round(full.wall * 1000)})
    result.rows.append({"sync": "resume after a reset at 50%", "file_bytes": so.size, "bytes_sent": resent,
                        "process_ms": round(resumed.wall * 1000), "range": ", ".join(str(r) for r in ranges)})
    result.data.update(file_bytes=so.size, restart_bytes=full_so, resumed_bytes=resent)
    result.notes.append(f"{variant.name}/{so.path}: {so.size} bytes; a resume re-sends {resent} "
                        f"({resent / max(full_so, 1):.2f}x a restart from 0)")
    return result
