"""`kernlock lock` refusals that name the right culprit (issue 28 item 17): a kernel depending on itself, a bogus
migrated commit, duplicate tree entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import CPU, cli, make_project
from kernlock.testing.hub import TestHub


def _depend(hub: TestHub, repo: str, on: str) -> str:
    """Push a rebuild of `repo`'s v1 whose every variant's metadata.json lists `on` (version 1) in kernel-depends."""
    import json

    from kernlock.testing.fixtures import git, push_build

    path = hub.repo_path(repo)
    listed = git(path, "ls-tree", "-r", "--name-only", "refs/heads/v1").decode().split()
    files = {}
    for name in [p for p in listed if p.startswith("build/") and p.endswith("/metadata.json")]:
        metadata = json.loads(git(path, "cat-file", "blob", f"refs/heads/v1:{name}"))
        metadata["kernel-depends"] = [{"repo-id": on, "version": 1}]
        files[name] = (json.dumps(metadata, indent=2) + "\n").encode()
    return push_build(path, "v1", files, f"depend on {on}")


@pytest.mark.parametrize("shape", ["itself", "two-kernel cycle"])
def test_a_kernel_that_depends_on_itself_is_refused_at_lock_time(hub: TestHub, tmp_path: Path, shape: str) -> None:
    from helpers import ACTIVATION as DEP
    from helpers import WITH_DEP

    if shape == "itself":
        commit, cycle = _depend(hub, WITH_DEP, WITH_DEP), f"{WITH_DEP} -> {WITH_DEP}"
    else:  # with-dep v1 lists activation v1; activation v1 now lists with-dep v1
        commit, cycle = _depend(hub, DEP, WITH_DEP), f"{DEP} -> {WITH_DEP} -> {DEP}"
    first = cycle.split(" -> ")[0]
    project = make_project(tmp_path / "p", kernels=[f"{WITH_DEP}@v1"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernlock: error: "), result.output
    assert f"kernel-depends form a cycle: {cycle} (in metadata.json at {first}@{commit[:12]})" in lines[0], lines[0]
    assert f"fix: pin a revision without the cycle (`kernlock lock {first}@<commit>`)" in lines[0]
    assert not (project / "kernels.lock").exists()


def test_migrating_a_bogus_commit_names_the_lock_not_the_hub(hub: TestHub, tmp_path: Path) -> None:
    import json

    from helpers import ACTIVATION as REPO

    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(f'[project]\nname = "demo"\nversion = "0"\n\n[tool.kernels.dependencies]\n"{REPO}" = 1\n'
                                            f'\n[tool.kernlock]\ntargets = ["{CPU}"]\n')
    bogus = "0123456789abcdef0123456789abcdef01234567"  # well formed, on no branch of the repo
    (project / "kernels.lock").write_text(json.dumps([{"dependency": {"repo-id": REPO, "version": 1},
                                                       "lock": {"commit": bogus}}]))
    result = cli("lock", "--migrate", cwd=project)
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert "looks broken" not in lines[0] and "try again later" not in lines[0]
    assert f"kernels' JSON lock pins {REPO} to commit {bogus[:12]}, which the Hub does not have" in lines[0], lines[0]
    assert "fix: correct or remove that pin in the JSON lock, then run `kernlock lock --migrate` again" in lines[0]
    assert json.loads((project / "kernels.lock").read_text())[0]["lock"]["commit"] == bogus  # nothing was written


def test_duplicate_tree_entries_blame_the_hub_listing_not_a_hand_edit(hub: TestHub, tmp_path: Path) -> None:
    import json
    import urllib.request

    from helpers import ACTIVATION as REPO

    with urllib.request.urlopen(f"{hub.url}/api/kernels/{REPO}/tree/v1/build?recursive=true", timeout=30) as answer:
        listing = json.loads(answer.read())
    entry = next(e for e in listing if e.get("type") == "file" and "cpu" in e["path"])
    project = make_project(tmp_path / "p", kernels=[f"{REPO}@v1"], targets=[CPU])
    hub.add_fault("respond", match="/tree/", times=5, body=[*listing, dict(entry)])  # one real entry listed twice
    result = cli("lock", cwd=project)
    assert result.exit_code == 1, result.output
    assert "undo the hand edit" not in result.output  # was: the lock model's fix for a hand-edited lock
    assert f"the Hub listed {entry['path']!r}" in result.output and "more than once" in result.output, result.output
    assert not (project / "kernels.lock").exists()
