"""Targets carry the Python version kernels 0.19 ranks new-style variants by (`cpython-3.9-abi3`, `abi3t`).

kernels is the oracle: every fixture repo's builds at every commit, for every target the tests use, on
Python 3.10-3.13 (and free-threaded 3.13 and 3.15), get the variant kernels' own
`_resolve_variant_for_system` picks with the full parameters.
"""

from __future__ import annotations

import json
import re
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import CPU, CUDA_X86, REPO_ROOT, cli, make_project
from kernlock._internal.compat.kernels_api import line, system_parameters
from kernlock._internal.host import current_target, interpreter, running_python
from kernlock._internal.hub.variants import choose_variant
from kernlock._internal.lockfile.serialize import dumps_lockfile, load_lockfile, parse_lockfile
from kernlock._internal.spec.target import parse_target
from kernlock.errors import TargetError
from kernlock.testing.fixtures import git
from kernlock.testing.hub import TestHub
from scripts.harness import load_identities

PYABI = "kernels-community/pyabi"
BUILD_39 = "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux"
BUILD_313 = "torch-2.13-cpu-cpython-3.13-abi3-x86_64-linux"
BUILD_315T = "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux"
needs_python_abi = pytest.mark.skipif(not line().PYTHON_ABI, reason="kernels before 0.19 has no Python dimension")


def test_target_python_part_parses_prints_and_sorts() -> None:
    assert parse_target(f"{CPU}-cp311").python == "3.11" and not parse_target(f"{CPU}-cp311").free_threaded
    free = parse_target(f"{CPU}-cp315t")
    assert (free.python, free.free_threaded, str(free)) == ("3.15", True, f"{CPU}-cp315t")
    assert str(parse_target("torch2.9-metal-aarch64-darwin-macos15.4-cp310")) == "torch2.9-metal-aarch64-darwin-macos15.4-cp310"
    plain = parse_target(CPU)  # old target strings read as before: no Python part, the running interpreter's
    assert (str(plain), plain.python, interpreter(plain)) == (CPU, None, running_python())
    assert current_target().python is None
    assert sorted({parse_target(f"{CPU}-cp313"), plain, parse_target(f"{CPU}-cp311")}) == [
        plain, parse_target(f"{CPU}-cp311"), parse_target(f"{CPU}-cp313")]
    with pytest.raises(TargetError, match=r"free-threaded Python starts at 3.13 \(cp313t\)"):
        parse_target(f"{CPU}-cp312t")
    with pytest.raises(TargetError, match=r"\[-cp<major><minor>\[t\]\]"):
        parse_target(f"{CPU}-py3.11")


def test_running_python_is_what_kernels_detects() -> None:
    assert running_python() == (f"{sys.version_info.major}.{sys.version_info.minor}",
                                bool(sysconfig.get_config_var("Py_GIL_DISABLED")))
    if line().PYTHON_ABI:
        from kernels._internals.variants import _is_free_threaded_build

        assert running_python()[1] == _is_free_threaded_build()


def test_python_is_passed_only_to_kernels_that_takes_it() -> None:
    from packaging.version import Version

    declared = system_parameters(parse_target(f"{CPU}-cp315t"))
    plain = system_parameters(parse_target(CPU))
    if line().PYTHON_ABI:
        assert (declared["python_version"], declared["free_threaded"]) == (Version("3.15"), True)
        assert (str(plain["python_version"]), plain["free_threaded"]) == running_python()
    else:  # 0.17/0.18: `_resolve_variant_for_system` has no such parameter
        assert "python_version" not in declared and "free_threaded" not in plain


def test_an_old_lock_reads_and_writes_the_same(tmp_path: Path) -> None:
    text = (REPO_ROOT / "tests" / "data" / "kernels-1.0.lock").read_text()  # written before Python targets
    lock = parse_lockfile(text)
    assert all(target.python is None for target in lock.targets)
    assert dumps_lockfile(lock) == text


@needs_python_abi
@pytest.mark.slow
def test_machine_lock_takes_this_pythons_build_and_a_declared_python_its_own(hub: TestHub, tmp_path: Path) -> None:
    here = sys.version_info[:2]
    expected_here = BUILD_313 if here >= (3, 13) else BUILD_39  # the highest minimum Python this interpreter meets
    project = make_project(tmp_path / "p", kernels=[f"{PYABI}@v1"], targets=[f"{CPU}-cp313", f"{CPU}-cp310"])
    assert cli("lock", cwd=project).exit_code == 0
    kernel = load_lockfile(project / "kernels.lock").kernels[0]
    targets = [str(t) for t in load_lockfile(project / "kernels.lock").targets]
    assert targets == [f"{CPU}-cp310", f"{CPU}-cp313"]
    assert kernel.variant_for(f"{CPU}-cp313").name == BUILD_313
    assert kernel.variant_for(f"{CPU}-cp310").name == BUILD_39
    # This machine (no Python part: the running interpreter), locked as a project without declared targets does.
    make_project(project, kernels=[f"{PYABI}@v1"])
    machine = cli("lock", cwd=project)
    assert machine.exit_code == 0
    python = "{}.{}".format(*here)
    assert (f"{PYABI}@v1: on {CPU} kernels loads a build that depends on the Python version; locked {expected_here} "
            f"for this interpreter (Python {python}); name the Python in the target for the others, "
            f"e.g. {CPU}-cp{python.replace('.', '')}") in machine.output
    lock = load_lockfile(project / "kernels.lock")
    assert lock.kernels[0].variant_for(CPU).name == expected_here
    if here == (3, 11):  # the case: the 3.13 build, which kernels rejects here, is not locked for this machine
        assert lock.kernels[0].variant_for(CPU).name == BUILD_39
    # kernels itself loads that build under the lock, and the lock names it.
    [loaded] = load_identities(project, [PYABI], version=1)
    assert loaded["variant"] == expected_here
    explained = cli("explain", PYABI, "--target", f"{CPU}-cp311", cwd=project)
    assert f"{BUILD_313}: Python 3.13 or later is required, system Python version is 3.11" in explained.output


@needs_python_abi
def test_free_threaded_targets_take_abi3t_or_fail_with_kernels_reasons(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{PYABI}@v1"], targets=[f"{CPU}-cp315t"])
    assert cli("lock", cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernels[0].variant_for(f"{CPU}-cp315t").name == BUILD_315T
    make_project(project, kernels=[f"{PYABI}@v1"], targets=[f"{CPU}-cp313t"])
    failed = cli("lock", cwd=project)
    assert failed.exit_code != 0
    assert f"has no build for {CPU}-cp313t" in failed.output
    assert "abi3 is not supported on free-threaded Python, abi3t is required" in failed.output
    reasons = json.loads(cli("lock", "--json", cwd=project).output)["error"]["problems"][0]["reasons"]
    assert any("Python 3.15 or later is required, system Python version is 3.13" in r for r in reasons)


# ---------------------------------------------------------------- kernels as the oracle

_TARGET_RE = re.compile(r"torch\d+\.\d+(?:-cxx11|-cxx98)?-[a-z0-9]+-[a-z0-9_]+-(?:linux|darwin|windows)"
                        r"(?:-tvm-ffi\d+\.\d+)?(?:-macos\d+(?:\.\d+)?)?")


def _test_targets() -> list[str]:
    """Every target string the tests use (Python parts stripped: the enumeration adds its own)."""
    found = {CPU, CUDA_X86}
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        found.update(_TARGET_RE.findall(path.read_text(encoding="utf-8")))
    targets = set()
    for text in found:
        try:
            targets.add(str(parse_target(text)))
        except TargetError:
            continue  # a deliberately bad target of some test
    return sorted(targets)


def _fixture_builds(repos: dict[str, Path]) -> dict[tuple[str, ...], str]:
    """Each distinct set of build variant names of any commit of any fixture repo, with one repo@commit having it."""
    builds: dict[tuple[str, ...], str] = {}
    for repo, path in repos.items():
        for commit in git(path, "rev-list", "--all").decode().split():
            listed = git(path, "ls-tree", "--name-only", f"{commit}:build").decode().split()
            builds.setdefault(tuple(sorted(listed)), f"{repo}@{commit[:12]}")
    return builds


def _oracle(names: tuple[str, ...], target: str, python: str | None, free_threaded: bool) -> str | None:
    """kernels' own choice, its parameters built here from the target's parts (not through kernlock._internal.compat)."""
    from packaging.version import Version

    variants_module = sys.modules[f"{line().ROOT}.variants"]
    backends = sys.modules[f"{line().ROOT}.backends"]
    parsed = []
    for name in names:
        try:
            parsed.append(variants_module.parse_variant(name))
        except ValueError:
            continue
    t = parse_target(target)
    try:
        backend = backends.parse_backend([t.backend], legacy=True)  # kernels 0.19: parts and a legacy flag
    except TypeError:
        backend = backends.parse_backend(t.backend)  # 0.17/0.18: the name
    macos = t.macos or (str(variants_module._METAL_MIN_MACOS_VERSION) if t.os == "darwin" else None)
    extra = {"python_version": Version(python), "free_threaded": free_threaded} if python else {}
    accepted, _ = variants_module._resolve_variant_for_system(
        variants=parsed, selected_backend=backend, cpu=t.cpu, os=t.os, torch_version=Version(t.torch_version),
        torch_cxx11_abi=t.cxx11_abi, tvm_ffi_version=Version(t.tvm_ffi) if t.tvm_ffi else None,
        macos_version=Version(macos) if macos else None, **extra)
    return accepted[0].variant_str if accepted else None


def test_every_fixture_build_for_every_target_and_python_is_kernels_choice(
        fixture_repos_template: dict[str, Path]) -> None:
    import importlib

    importlib.import_module(f"{line().ROOT}.variants")
    builds = _fixture_builds(fixture_repos_template)
    targets = _test_targets()
    assert PYABI in " ".join(builds.values()) and len(targets) >= 5
    # (Python part, version, free-threaded); kernels 0.17/0.18 has no Python dimension: the plain target only.
    pythons = [(f"-cp3{minor}", f"3.{minor}", False) for minor in (10, 11, 12, 13)] + [
        ("-cp313t", "3.13", True), ("-cp315t", "3.15", True)] if line().PYTHON_ABI else [("", None, False)]
    compared = python_specific = 0
    for names, where in builds.items():
        for target in targets:
            choices = set()
            for suffix, python, free in pythons:
                chosen, _ = choose_variant(names, parse_target(target + suffix))
                expected = _oracle(names, target, python, free)
                assert chosen == expected, f"{where} {target}{suffix}: kernlock {chosen}, kernels {expected}"
                choices.add(chosen)
                compared += 1
            python_specific += len(choices) > 1
    assert compared >= len(builds) * len(targets) * len(pythons)
    if line().PYTHON_ABI:
        assert python_specific > 0  # the enumeration does reach builds whose choice depends on the Python
