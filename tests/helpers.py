"""Shared test helpers: tiny projects and running the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest
from click.testing import CliRunner, Result

from kernlock._internal.cli.main import main
from kernlock._internal.host import current_target
from kernlock._internal.lockfile.entries import LockedFile, LockedKernel, LockedVariant, Lockfile
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.rules.signatures import TRUSTED_ROOT_ENV
from kernlock._internal.spec.target import parse_target
from kernlock.testing.sigstore import TestSigstore

# Targets (CPU is this test machine's).
FIXTURE_CPU = "torch2.13-cxx11-cpu-x86_64-linux"  # the target of the fixture kernels' CPU build
FIXTURE_CPU_BUILD = "torch213-cxx11-cpu-x86_64-linux"


def this_torchs_build() -> str | None:
    """Where the suite runs on another Torch than the fixtures' 2.13 CPU build (a matrix cell's torch 2.14 CUDA
    wheel), this Torch's own variant name: the fixtures build the CPU build under it too (conftest), since the
    fixture kernels are pure Python; None on the fixtures' own Torch."""
    here = current_target()
    if here.os != "linux" or here.cxx11_abi is not True:
        return None
    name = f"torch{here.torch[0]}{here.torch[1]}-cxx11-{here.backend}-{here.cpu}-linux"
    return None if name == FIXTURE_CPU_BUILD else name


# this machine: the fixtures' CPU target, or on another Torch this one's (the fixtures build for it too)
CPU = FIXTURE_CPU if this_torchs_build() is None else str(current_target())
CUDA_X86 = "torch2.12-cxx11-cu128-x86_64-linux"
CUDA_130 = "torch2.11-cxx11-cu130-x86_64-linux"
ARM = "torch2.10-cxx11-cu128-aarch64-linux"

# The fixture kernel repos (fixtures/*.toml).
FA2 = "kernels-community/flash-attn2"
ACTIVATION = "kernels-community/activation"
TAGGED = "kernels-community/tagged"
UNIVERSAL = "kernels-community/universal"
WITH_DEP = "kernels-community/with-dep"
PROVENANCE = "kernels-community/provenance"
RELU = "kernels-community/relu"
UNTRUSTED = "untrusted-org/some-kernel"

# `[tool.kernlock]` text: the seed's override, flash-attn2 pinned to v2 on CUDA 12.8.
CU128_ON_V2 = f'''
[[tool.kernlock.overrides."{FA2}"]]
backend = "cu128"
revision = "v2"
reason = "v3+ fails in the GQA backward pass on CUDA 12.8"
'''

_UNSET_ENV = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HF_HUB_DISABLE_TELEMETRY",
    "KERNELS_CACHE",
    "LOCAL_KERNELS",
    "HF_TOKEN_PATH",
    "HF_XET_CACHE",
)


REPO_ROOT = Path(__file__).resolve().parent.parent


def copy_checkout(dest: Path) -> Path:
    """Copy this checkout's files (uncommitted changes included, ignored files not) to `dest`; return `dest`."""
    import shutil

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            check=True, capture_output=True, text=True).stdout
    for name in filter(None, listed.split("\0")):
        if (REPO_ROOT / name).is_file():  # deleted but not yet staged: not part of the checkout
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, dest / name)
    return dest


def markdown_blocks(text: str, language: str) -> list[str]:
    """The ```language fenced blocks of a Markdown text, in order."""
    blocks, rest = [], text
    while f"```{language}\n" in rest:
        start = rest.index(f"```{language}\n") + len(language) + 4
        end = rest.index("```", start)
        blocks.append(rest[start:end])
        rest = rest[end + 3:]
    return blocks


def make_project(root: Path, kernels: Sequence[str] = (), targets: Sequence[str] = (), extra: str = "") -> Path:
    """Write a pyproject.toml with a [tool.kernlock] table; return the project dir."""
    root.mkdir(parents=True, exist_ok=True)
    lines = ["[project]", 'name = "demo"', 'version = "0"', "", "[tool.kernlock]"]
    lines.append("kernels = [" + ", ".join(f'"{k}"' for k in kernels) + "]")
    if targets:
        lines.append("targets = [" + ", ".join(f'"{t}"' for t in targets) + "]")
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n" + extra)
    return root


class LockedProject(NamedTuple):
    """A project locked against the test Hub: its directory and its lock."""

    path: Path
    lock: Lockfile


LockedProjectFactory = Callable[..., LockedProject]  # the `locked_project` fixture (conftest.py)


def lock_project(root: Path, kernels: Sequence[str], targets: Sequence[str] = (), extra: str = "",
                 files: dict[str, str] | None = None) -> LockedProject:
    """Write a project at `root` (pyproject.toml plus `files`) and lock it with `kernlock lock`, which must succeed."""
    project = make_project(root, kernels=list(kernels), targets=list(targets), extra=extra)
    for name, text in (files or {}).items():
        (project / name).write_text(text)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    return LockedProject(project, load_lockfile(project / "kernels.lock"))


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


def kernels_module(name: str) -> ModuleType:
    """A kernels module by its name in the package (`importer`, `layer.layer`), wherever this kernels keeps it."""
    import importlib

    from kernlock._internal.compat.kernels_api import module_name

    return importlib.import_module(module_name(name))


def clear_loaded_kernels() -> None:
    """Forget the kernels `get_kernel` imported in this process (`get_loaded_kernels`), so the next load imports anew."""
    kernels_module("importer")._loaded_kernels.clear()


def patch_hub_client(monkeypatch: pytest.MonkeyPatch, endpoint: str, hf_home: Path) -> None:
    """Point huggingface_hub and kernels at ``endpoint`` with a private ``hf_home``.

    Both libraries copy environment variables into module constants at import
    time, so setting the environment alone does not affect this process.
    """
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.utils import _cache_manager, _git_credential

    for name in _UNSET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    # The test Hub lists `xetHash` as the Hub does but runs no Xet server: clients use plain HTTP,
    # as they do where hf_xet is not installed or the Xet host is blocked.
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    # The fixtures' signature bundles come from the test Sigstore: verify them against its root.
    monkeypatch.setenv(TRUSTED_ROOT_ENV, str(TestSigstore().write_trusted_root(hf_home.parent / "sigstore-trusted-root.json")))

    hub_cache = str(hf_home / "hub")
    template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    for name, value in {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": template,
        "HF_HOME": str(hf_home),
        "HF_HUB_CACHE": hub_cache,
        "HUGGINGFACE_HUB_CACHE": hub_cache,
        "HF_ASSETS_CACHE": str(hf_home / "assets"),
        "HUGGINGFACE_ASSETS_CACHE": str(hf_home / "assets"),
        "HF_XET_CACHE": str(hf_home / "xet"),
        "HF_TOKEN_PATH": str(hf_home / "token"),
        "HF_STORED_TOKENS_PATH": str(hf_home / "stored_tokens"),
        "CHECK_FOR_UPDATE_DONE_PATH": str(hf_home / ".check_for_update_done"),
        "CHECK_FOR_SKILL_UPDATE_DONE_PATH": str(hf_home / ".check_for_skill_update_done"),
        "AGENT_HARNESSES_PATH": str(hf_home / ".agent_harnesses.json"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": False,
        "HF_HUB_DISABLE_XET": True,
    }.items():
        monkeypatch.setattr(constants, name, value, raising=False)  # older huggingface_hub lacks some (matrix)
    monkeypatch.setattr(huggingface_hub, "HUGGINGFACE_CO_URL_TEMPLATE", template, raising=False)
    monkeypatch.setattr(_cache_manager, "HF_HUB_CACHE", hub_cache)
    monkeypatch.setattr(_git_credential, "ENDPOINT", endpoint)
    # kernels 0.17 copies the cache dir at import (0.16: into `utils`, its one loader module)
    for name in ("hf_hub", "install", "locking", "resolver", "utils"):
        try:
            module = kernels_module(name)
        except ModuleNotFoundError:  # a module of another kernels line
            continue
        monkeypatch.setattr(module, "CACHE_DIR", None, raising=False)


# The README's quick start (tests/integration/docs/test_readme_quickstart.py runs it; others reuse its parts).

def quick_start_section() -> str:
    """The README's "Quick start" section."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):]
    return section[:section.index("\n## ", 3)]


def quick_start_blocks(language: str) -> list[str]:
    """The ```language blocks of the README's "Quick start" section, in order."""
    return markdown_blocks(quick_start_section(), language)


def run_bash(script: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    """Run a shell block as written (bash -euo pipefail), this environment's bin directory first on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra_env}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def tiny_model_recipe() -> str:
    """The tutorial's recipe for a tiny `./model` and `./data`: the one Python block of its section."""
    text = (REPO_ROOT / "docs" / "tutorial" / "quick-start.md").read_text(encoding="utf-8")
    section = text[text.index("### A tiny model and data set to try it"):text.index("\n## 2. ")]
    [block] = markdown_blocks(section, "python")
    return block


def run_tiny_model_recipe(project: Path) -> None:
    """Run the tutorial's recipe as written, as a user does: `python` in the project directory."""
    done = subprocess.run([sys.executable, "-c", tiny_model_recipe()], cwd=project, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def tiny_model_and_data(project: Path) -> None:
    """A tiny random model in `./model` and a tiny data set in `./data`: what the quick start's paths stand for."""
    from scripts import tiny

    tiny.tokenizer(project / "model")
    tiny.model("sdpa").save_pretrained(project / "model")
    (project / "data").mkdir()
    (project / "data" / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in tiny.texts()["text"]))


# Locks built in memory.

def sample_lockfile() -> Lockfile:
    """A one-kernel lock for this machine's CPU target."""
    cpu = parse_target(CPU)
    return Lockfile(
        version="1.0",  # what the resolver writes for a lock without signers (`format_for`)
        targets=(cpu,),
        inputs=("org/repo",),
        resolved_with={"kernlock": "0.1.0"},
        kernels=(
            LockedKernel(
                spec="org/repo", repo="org/repo", commit="a" * 40, resolution="branch v1", trust="trusted-publisher",
                version=1, ref="v1", build_variants=("torch213-cxx11-cpu-x86_64-linux",),
                variants=(
                    LockedVariant(
                        name="torch213-cxx11-cpu-x86_64-linux",
                        targets=(cpu,),
                        files=(LockedFile(path="b.py", sha256="1" * 64, size=3), LockedFile(path="a.py", sha256="2" * 64, size=4)),
                    ),
                ),
            ),
        ),
    )


def big_lock(kernels: int = 30, variants: int = 6) -> Lockfile:
    """A lock well over `MIN_CACHED_BYTES`."""
    entries = []
    for k in range(kernels):
        repo = f"org/kernel-{k:03d}"
        locked = tuple(
            LockedVariant(
                name=f"torch2{v}-cxx11-cpu-x86_64-linux",
                targets=(parse_target(f"torch2.{v}-cxx11-cpu-x86_64-linux"),),
                files=tuple(LockedFile(path=f"pkg/file{n}.py", sha256=f"{k:02d}{v:02d}{n:02d}".ljust(64, "0"), size=100 + n) for n in range(4)),
            )
            for v in range(variants)
        )
        entries.append(LockedKernel(
            spec=repo, repo=repo, commit=f"{k:040x}", resolution="branch v1", trust="trusted-publisher",
            version=1, ref="v1", build_variants=tuple(v.name for v in locked), variants=locked,
        ))
    return Lockfile(targets=tuple(parse_target(f"torch2.{v}-cxx11-cpu-x86_64-linux") for v in range(variants)),
                    inputs=tuple(k.spec for k in entries), kernels=tuple(entries), resolved_with={"kernlock": "0.1.0"})
