"""Pytest fixtures: fixture kernel repos served by a local Hub-compatible server."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from helpers import (
    ACTIVATION,
    FIXTURE_CPU_BUILD,
    LockedProject,
    LockedProjectFactory,
    clear_loaded_kernels,
    kernels_module,
    lock_project,
    patch_hub_client,
    this_torchs_build,
)
from kernlock.testing.fixtures import advance_branch, build_fixture_repos, default_fixtures_dir
from kernlock.testing.hub import TestHub

TESTS = Path(__file__).resolve().parent
# Run order: the kinds with the longest tests first (fresh interpreters importing torch, TRL runs, real installs),
# the unit tests last, so that under `pytest -n auto` no long test is left running alone at the end.
# The order within a module stays as written.
SLOWEST_FIRST = ("integration", "runtime", "cli", "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def kind(item: pytest.Item) -> int:
        top = Path(item.path).resolve().relative_to(TESTS).parts[0]
        return SLOWEST_FIRST.index(top) if top in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=kind)


@pytest.fixture(autouse=True)
def private_kernlock_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test (and the processes it starts) gets its own kernlock parse cache."""
    cache = tmp_path / "kernlock-cache"
    monkeypatch.setenv("KERNLOCK_CACHE_DIR", str(cache))
    monkeypatch.delenv("KERNLOCK_NO_CACHE", raising=False)
    return cache


@pytest.fixture(scope="session")
def fixture_repos_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture repos, built once per session (do not mutate: copy them)."""
    return build_fixture_repos(default_fixtures_dir(), tmp_path_factory.mktemp("fixture-repos"),
                               {FIXTURE_CPU_BUILD: build} if (build := this_torchs_build()) else None)



def _forget_loaded_kernels() -> None:
    """Drop imported fixture kernels and the in-process caches of kernels/transformers."""
    kernel_ids = [name for name, module in list(sys.modules.items())  # not hasattr: lazy modules import on it
                  if "KERNEL_IDENTITY" in getattr(module, "__dict__", {})]
    for name in list(sys.modules):
        if any(name == kid or name.startswith(f"{kid}.") for kid in kernel_ids):
            del sys.modules[name]
    clear_loaded_kernels()
    kernels_module("load")._parse_local_kernel_overrides.cache_clear()
    kernels_module("layer.layer")._CACHED_LAYER.clear()
    for module, repository in (("layer.layer", "LayerRepository"), ("layer.func", "FuncRepository")):
        cached = getattr(getattr(kernels_module(module), repository), "_resolve_revision", None)  # kernels 0.17
        if cached is not None:
            cached.cache_clear()
    if (flash_utils := sys.modules.get("transformers.modeling_flash_attention_utils")) is not None:
        flash_utils._loaded_implementation = None  # type: ignore[attr-defined]  # transformers' attribute, not followed


@pytest.fixture
def fresh_kernels() -> Iterator[None]:
    """Each test imports fixture kernels anew (and leaves none behind)."""
    _forget_loaded_kernels()
    yield
    _forget_loaded_kernels()


@pytest.fixture
def hub(
    fixture_repos_template: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_kernels: None,
) -> Iterator[TestHub]:
    """A running TestHub over the fixture repos, used by this process (`hub.repo_path()` gives a private copy)."""
    with TestHub(fixture_repos_template, copy_on_change=tmp_path / "repos") as server:
        patch_hub_client(monkeypatch, server.url, tmp_path / "hf_home")
        yield server



@pytest.fixture
def locked_project(hub: TestHub, tmp_path: Path) -> LockedProjectFactory:
    """Make and lock a project: ``locked_project(kernels, targets=(), extra="", files=None, root=None)``.

    ``targets=()`` locks for this machine; ``extra`` is appended to ``[tool.kernlock]``; ``files`` (name -> text)
    are written before locking; the project lies at ``root`` (default ``tmp_path / "p"``).
    """
    def make(kernels: list[str], targets: Sequence[str] = (), extra: str = "", files: dict[str, str] | None = None,
             root: Path | None = None) -> LockedProject:
        return lock_project(root or tmp_path / "p", kernels, targets, extra, files)

    return make


@pytest.fixture
def release_applied_lock() -> Iterator[None]:
    """Whatever lock the test applied in this process is released after it (autouse under tests/runtime/)."""
    yield
    from kernlock._internal.runtime.apply import release

    release()


@pytest.fixture
def release_and_unload_kernels() -> Iterator[None]:
    """As `release_applied_lock`, then kernels' list of loaded kernels is emptied too."""
    yield
    from kernlock._internal.runtime.apply import release

    release()
    clear_loaded_kernels()


@pytest.fixture
def locked(hub: TestHub, locked_project: LockedProjectFactory):
    """A project locking activation@v1 (a layer kernel); its branch then moves upstream."""
    project, lock = locked_project([f"{ACTIVATION}@v1"])
    [entry] = lock.kernels
    assert advance_branch(hub.repo_path(ACTIVATION), "v1") != entry.commit
    return project, lock, entry
