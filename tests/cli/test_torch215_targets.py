"""Torch 2.15 / CUDA 13.2 targets (`pip install torch` today) lock like any other target.

Fixture kernels with stable-ABI (`torch-stable-abi210-cu132-…`), exact-Torch (`torch215-cxx11-cu132-…`) and
noarch (`torch-cuda`) builds, in every mix, are locked for `torch2.15-cxx11-cu132-x86_64-linux` and its `cu130`
twin; the variant in the lock is the one kernels' own `_resolve_variant_for_system` picks for every pair (kernels
is the oracle), including the `cu132` builds it refuses on a `cu130` Torch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import cli, make_project, patch_hub_client
from kernlock._internal.compat.kernels_api import line
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.spec.target import parse_target
from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir
from kernlock.testing.hub import TestHub

TARGETS = ["torch2.15-cxx11-cu132-x86_64-linux", "torch2.15-cxx11-cu130-x86_64-linux"]
STABLE_132, STABLE_130 = "torch-stable-abi210-cu132-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux"
EXACT_132, EXACT_130 = "torch215-cxx11-cu132-x86_64-linux", "torch215-cxx11-cu130-x86_64-linux"
NOARCH = "torch-cuda"
# repo name -> its builds: each mix of the three kinds, and CUDA 13.2 builds alone beside a noarch one
BUILDS = {
    "all-three": [STABLE_132, STABLE_130, EXACT_132, EXACT_130, NOARCH],
    "stable-and-exact": [STABLE_132, STABLE_130, EXACT_132, EXACT_130],
    "exact-and-noarch": [EXACT_132, EXACT_130, NOARCH],
    "stable-and-noarch": [STABLE_132, STABLE_130, NOARCH],
    "cu132-only": [STABLE_132, EXACT_132, NOARCH],
    "noarch-only": [NOARCH],
}
needs_kernels_019 = pytest.mark.skipif(line().FIRST < (0, 19), reason="the oracle is kernels 0.19's ranking")


@pytest.fixture(scope="module")
def torch215_repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    fixtures = tmp_path_factory.mktemp("torch215-fixtures")
    (fixtures / "templates").symlink_to(default_fixtures_dir() / "templates", target_is_directory=True)
    for name, builds in BUILDS.items():
        variants = ", ".join(f'"{v}"' for v in builds)
        (fixtures / f"kernels-community__t215-{name}.toml").write_text(
            f'repo = "kernels-community/t215-{name}"\ntemplate = "simple"\n\n[[commits]]\nlabel = "{name} #1"\n'
            f'branch = "v1"\nalso = ["main"]\nvariants = [{variants}]\n')
    return build_fixture_repos(fixtures, tmp_path_factory.mktemp("torch215-repos"))


@pytest.fixture
def torch215_hub(torch215_repos: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestHub]:
    with TestHub(torch215_repos) as server:
        patch_hub_client(monkeypatch, server.url, tmp_path / "hf_home")
        yield server


def _kernels_pick(names: list[str], target: str) -> str | None:
    """kernels' own choice for `target`, its parameters built here from the target's parts."""
    from packaging.version import Version

    variants = sys.modules[f"{line().ROOT}.variants"]
    backends = sys.modules[f"{line().ROOT}.backends"]
    t = parse_target(target)
    accepted, _ = variants._resolve_variant_for_system(
        variants=[variants.parse_variant(n) for n in names], selected_backend=backends.parse_backend([t.backend], legacy=True),
        cpu=t.cpu, os=t.os, torch_version=Version(t.torch_version), torch_cxx11_abi=t.cxx11_abi, tvm_ffi_version=None,
        macos_version=None, python_version=Version(f"{sys.version_info.major}.{sys.version_info.minor}"),
        free_threaded=False)
    return accepted[0].variant_str if accepted else None


@needs_kernels_019
def test_torch215_targets_lock_kernels_choice_of_stable_abi_exact_and_noarch_builds(
        torch215_hub: TestHub, tmp_path: Path) -> None:
    import importlib

    importlib.import_module(f"{line().ROOT}.variants")
    specs = [f"kernels-community/t215-{name}@v1" for name in BUILDS]
    project = make_project(tmp_path / "p", kernels=specs, targets=TARGETS)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    picks = {}
    for name, builds in BUILDS.items():
        [kernel] = [k for k in lock.kernels if k.repo == f"kernels-community/t215-{name}"]
        for target in TARGETS:
            expected = _kernels_pick(builds, target)
            locked = kernel.variant_for(parse_target(target))
            assert (locked.name if locked else None) == expected, f"{name} {target}"
            picks[(name, target)] = expected
    # what the pairs reach: kernels ranks a stable-ABI build first, takes an exact build without one, refuses the
    # cu132 builds on a cu130 Torch (the noarch build then), and a noarch build alone serves both
    assert picks[("all-three", TARGETS[0])] == STABLE_132 and picks[("all-three", TARGETS[1])] == STABLE_130
    assert picks[("exact-and-noarch", TARGETS[0])] == EXACT_132
    assert picks[("cu132-only", TARGETS[1])] == NOARCH
    assert picks[("noarch-only", TARGETS[0])] == picks[("noarch-only", TARGETS[1])] == NOARCH
