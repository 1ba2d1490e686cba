"""Test-side helpers for the end-to-end tests: child scripts and what they report."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.spec.target import Target
from kernlock.testing.hub import TestHub

SCRIPTS = Path(__file__).resolve().parent
PRELUDE = "import json, os, sys\nimport torch\nimport tiny\n"
# Requests the Hub clients make on their own while downloading (telemetry), not for kernels.
CLIENT_CHATTER = ("/api/agent-harnesses", "/api/telemetry/")


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment (HF_ENDPOINT, HF_HOME) plus the scripts directory on PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(SCRIPTS), os.environ.get("PYTHONPATH", "")) if p)
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PYTHONPATH": path, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), **extra}


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (launchers such as torchrun start their workers in new sessions)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.extend(below := children.get(todo.pop(), []))
        todo.extend(below)
    return found


class Completed(subprocess.CompletedProcess[str]):
    """A finished child; `.result` holds the last thing its script reported with `tiny.result` (or None)."""

    result: Any


def run(args: list[str], cwd: Path, **env: str) -> Completed:
    """Run a command in a fresh process; `.result` holds what its script reported with `tiny.result`.

    A command still running after 240 seconds fails the test as `run_within` says.
    """
    return run_within(240, args, cwd, **env)


def run_within(timeout: float, args: list[str], cwd: Path, **env: str) -> Completed:
    """`run`, failing the test when the command still runs after `timeout` seconds, with its output and, for every
    Python process of the tree, the stack of each thread (faulthandler's dump on SIGABRT).

    (`timeout` is not a keyword of `run`: `run(args, cwd, **environment)` then type-checks for any str mapping.)
    """
    child = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=child_env(PYTHONFAULTHANDLER="1", **env))
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        for pid in [child.pid, *descendants(child.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGABRT)
        try:
            stdout, stderr = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            stdout, stderr = child.communicate()
        raise AssertionError(f"{args} ran past {timeout} s; stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-12000:]}") from expired
    return completed(args, child.returncode, stdout, stderr)


def completed(args: list[str], returncode: int, stdout: str, stderr: str) -> Completed:
    """A finished child; `.result` holds the last thing its script reported with `tiny.result` (or None)."""
    proc = Completed(args, returncode, stdout, stderr)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    proc.result = json.loads(lines[-1][len("RESULT "):]) if lines else None
    return proc


def python(code: str, cwd: Path, **env: str) -> Completed:
    """Run `code` (after a prelude importing json, os, sys, torch and tiny) in a fresh interpreter."""
    return run([sys.executable, "-c", PRELUDE + code], cwd, **env)


def kernlock_run(code: str, cwd: Path, *options: str, **env: str) -> Completed:
    """Run `code` under `kernlock run [options] -- python -c …`."""
    return run([sys.executable, "-m", "kernlock", "run", *options, "--", sys.executable, "-c", PRELUDE + code], cwd, **env)


def ok(proc: Completed) -> dict:
    """The child's result, failing with its output if it did not succeed."""
    assert proc.returncode == 0 and proc.result is not None, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.result


def load_identities(project: Path, names: list[str], env: dict[str, str] | None = None, **kwargs: object) -> list[dict]:
    """`KERNEL_IDENTITY` of each of `names` as `kernels.get_kernel(name, **kwargs)` loads it under `kernlock.apply()`,
    in a fresh interpreter in `project`."""
    code = ("import kernels, kernlock\nkernlock.apply()\n"
            f"tiny.result(identities=[kernels.get_kernel(name, **{kwargs!r}).KERNEL_IDENTITY for name in {names!r}])\n")
    return ok(python(code, project, **(env or {})))["identities"]


def verify_doctor(project: Path, env: dict[str, str] | None = None) -> dict:
    """The doctor's check from `kernlock verify --json` run in a fresh process in `project` (with `env` added)."""
    out = subprocess.run([sys.executable, "-m", "kernlock", "verify", "--json"], cwd=project, capture_output=True,
                         text=True, env={**os.environ, **(env or {})}, timeout=60)
    report = json.loads(out.stdout)
    return next(check for check in report["checks"] if check["name"] == "doctor")


def variant_of(lock: Lockfile, entry: LockedKernel) -> str:
    """The variant `entry` locks for the lock's (first) target."""
    return entry.variant_for(lock.targets[0]).name


def only_locked_files_requested(hub: TestHub, lock: Lockfile, target: Target | None = None) -> None:
    """Every kernel request was a download of a file `lock` holds for `target` (default: its first) at its commit."""
    target = target or lock.targets[0]
    variants = [(k, v) for k in lock.kernels if (v := k.variant_for(target)) is not None]
    allowed = tuple(f"/resolve/{k.commit}/build/{v.name}/" for k, v in variants)
    blobs = {f"/cdn/{f.sha256}/" for _, v in variants for f in v.files}
    log = [path for _, path in hub.log if not path.startswith(CLIENT_CHATTER)]
    assert log, "nothing was downloaded"
    assert all(("/resolve/" in path and any(a in path for a in allowed)) or path[:70] in blobs for path in log), log
