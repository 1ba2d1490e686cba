"""Shared test helpers: tiny projects and running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from kernlock.cli import main

CPU = "torch2.13-cxx11-cpu-x86_64-linux"
CUDA_X86 = "torch2.12-cxx11-cu128-x86_64-linux"
CUDA_130 = "torch2.11-cxx11-cu130-x86_64-linux"
ARM = "torch2.10-cxx11-cu128-aarch64-linux"


def make_project(root: Path, kernels: list[str] = (), targets: list[str] = (), extra: str = "") -> Path:
    """Write a pyproject.toml with a [tool.kernlock] table; return the project dir."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ["[project]", 'name = "demo"', 'version = "0"', "", "[tool.kernlock]"]
    lines.append("kernels = [" + ", ".join(f'"{k}"' for k in kernels) + "]")
    if targets:
        lines.append("targets = [" + ", ".join(f'"{t}"' for t in targets) + "]")
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n" + extra)
    return root


def cli(*args: str, cwd: Path | None = None) -> Result:
    """Run the kernlock CLI in-process (through click), in `cwd`."""
    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(previous)


def run_kernlock(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real `kernlock` console script in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "kernlock", *args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=timeout,
    )
