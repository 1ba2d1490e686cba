"""Pytest fixtures: fixture kernel repos served by a local Hub-compatible server."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir
from kernlock.testing.hub import TestHub

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
    return build_fixture_repos(default_fixtures_dir(), tmp_path_factory.mktemp("fixture-repos"))


def _forget_loaded_kernels() -> None:
    """Drop imported fixture kernels and the in-process caches of kernels/transformers."""
    import kernels.importer
    import kernels.layer.func
    import kernels.layer.layer
    import kernels.load

    kernel_ids = [name for name, module in list(sys.modules.items()) if hasattr(module, "KERNEL_IDENTITY")]
    for name in list(sys.modules):
        if any(name == kid or name.startswith(f"{kid}.") for kid in kernel_ids):
            del sys.modules[name]
    kernels.importer._loaded_kernels.clear()
    kernels.load._parse_local_kernel_overrides.cache_clear()
    kernels.layer.layer._CACHED_LAYER.clear()
    kernels.layer.layer.LayerRepository._resolve_revision.cache_clear()
    kernels.layer.func.FuncRepository._resolve_revision.cache_clear()
    if (flash_utils := sys.modules.get("transformers.modeling_flash_attention_utils")) is not None:
        flash_utils._loaded_implementation = None


@pytest.fixture
def fresh_kernels() -> Iterator[None]:
    """Each test imports fixture kernels anew (and leaves none behind)."""
    _forget_loaded_kernels()
    yield
    _forget_loaded_kernels()


def patch_hub_client(monkeypatch: pytest.MonkeyPatch, endpoint: str, hf_home: Path) -> None:
    """Point huggingface_hub and kernels at ``endpoint`` with a private ``hf_home``.

    Both libraries copy environment variables into module constants at import
    time, so setting the environment alone does not affect this process.
    """
    import huggingface_hub
    import kernels.hf_hub
    import kernels.install
    import kernels.locking
    import kernels.resolver
    from huggingface_hub import constants
    from huggingface_hub.utils import _cache_manager, _git_credential

    for name in _UNSET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    # The test Hub lists `xetHash` as the Hub does but runs no Xet server: clients use plain HTTP,
    # as they do where hf_xet is not installed or the Xet host is blocked.
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")

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
    for module in (kernels.hf_hub, kernels.install, kernels.locking, kernels.resolver):
        monkeypatch.setattr(module, "CACHE_DIR", None)


@pytest.fixture
def hub(
    fixture_repos_template: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_kernels: None,
) -> Iterator[TestHub]:
    """A running TestHub over private copies of the fixture repos, used by this process."""
    repos = {
        repo_id: Path(shutil.copytree(path, tmp_path / "repos" / path.name))
        for repo_id, path in fixture_repos_template.items()
    }
    with TestHub(repos) as server:
        patch_hub_client(monkeypatch, server.url, tmp_path / "hf_home")
        yield server
