"""How many Hub requests `kernlock lock` makes per kernel (issue 33, item 6: the lock stays fast with more entries).

Several kernels, each built for many variants as on real kernel repos, locked for a CPU and a CUDA target:
per kernel one refs request and one tree listing, and every small (git) file is fetched once per distinct
git blob however many variants or repos list it; the locked sha256s are still those of the bytes the Hub serves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import cli, make_project, patch_hub_client
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir
from kernlock.testing.hub import TestHub

KERNELS = 6
TARGETS = ["torch2.13-cxx11-cpu-x86_64-linux", "torch2.12-cxx11-cu128-x86_64-linux"]
VARIANTS = [
    "torch211-cxx11-cu128-x86_64-linux", "torch212-cxx11-cu128-x86_64-linux", "torch212-cxx11-cu130-x86_64-linux",
    "torch212-cxx11-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux",
]


@pytest.fixture(scope="module")
def many_repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`KERNELS` repos from the `simple` template, each with 6 variants on branch v1 (two commits)."""
    fixtures = tmp_path_factory.mktemp("many-fixtures")
    (fixtures / "templates").symlink_to(default_fixtures_dir() / "templates", target_is_directory=True)
    variants = ", ".join(f'"{v}"' for v in VARIANTS)
    for index in range(KERNELS):
        repo = f"kernels-community/many-k{index}"
        commits = "".join(f'\n[[commits]]\nlabel = "{repo} #{n}"\nbranch = "v1"\nalso = ["main"]\nvariants = [{variants}]\n'
                          for n in (1, 2))
        (fixtures / f"{repo.replace('/', '__')}.toml").write_text(f'repo = "{repo}"\ntemplate = "simple"\n{commits}')
    return build_fixture_repos(fixtures, tmp_path_factory.mktemp("many-repos"))


@pytest.fixture
def many_hub(many_repos: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestHub]:
    with TestHub(many_repos) as server:
        patch_hub_client(monkeypatch, server.url, tmp_path / "hf_home")
        yield server


def test_lock_makes_two_api_requests_per_kernel_and_fetches_each_small_blob_once(
        many_hub: TestHub, many_repos: dict[str, Path], tmp_path: Path) -> None:
    repos = sorted(many_repos)
    project = make_project(tmp_path / "p", kernels=[f"{repo}@v1" for repo in repos], targets=TARGETS)
    many_hub.reset_counts()
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    lock = load_lockfile(project / "kernels.lock")
    assert len(lock.kernels) == KERNELS and all(len(k.variants) == 2 for k in lock.kernels)

    requests = many_hub.requests
    fixed = requests["overview"] + requests["agent-registry"]  # one trust lookup per org; huggingface_hub's own
    assert requests["overview"] == 1 and requests["agent-registry"] <= 1
    assert requests["refs"] == requests["tree"] == KERNELS  # the build/ tree of 24 files is one page
    # Every small file of the locked variants (metadata.json, __init__.py, _identity.py) is fetched once per distinct
    # blob: the two variants of a kernel share its __init__.py, every kernel shares _identity.py.
    small = {f.sha256 for k in lock.kernels for v in k.variants for f in v.files if not f.path.endswith(".so")}
    assert requests["resolve"] == len(small) < 3 * 2 * KERNELS
    # refs, tree, two metadata.json and one __init__.py a kernel, one _identity.py for all: 8 a kernel before
    assert sum(requests.values()) - fixed <= 5 * KERNELS + 1, dict(requests)

    # The locked hashes are still those of the bytes the Hub serves, file by file.
    for kernel in lock.kernels:
        served = many_hub.repos[kernel.repo].entries(kernel.commit)
        for variant in kernel.variants:
            for locked in variant.files:
                entry = served[f"build/{variant.name}/{locked.path}"]
                data = many_hub.repos[kernel.repo].content(entry)
                assert (locked.sha256, locked.size) == (hashlib.sha256(data).hexdigest(), len(data))
