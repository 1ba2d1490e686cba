"""A repository renamed on the Hub: locked under its new name, applied under both, reported by verify and outdated."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import CPU, FA2, cli, make_project
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub
from scripts.harness import load_identities


@pytest.mark.slow
def test_renamed_repo_is_locked_and_applied_under_both_names(hub: TestHub, tmp_path: Path) -> None:
    hub.renames["kernels-community/flash-attn"] = FA2
    project = make_project(tmp_path / "p", kernels=["kernels-community/flash-attn@v2"], targets=[CPU])
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    assert "kernels-community/flash-attn was renamed to kernels-community/flash-attn2" in result.output
    kernel = load_lockfile(project / "kernels.lock").kernels[0]
    assert (kernel.spec, kernel.repo, kernel.aliases) == ("kernels-community/flash-attn@v2", FA2, ("kernels-community/flash-attn",))
    assert kernel.commit == rev_parse(hub.repo_path(FA2), "v2")
    loaded = load_identities(project, ["kernels-community/flash-attn", FA2], version=2)
    assert {item["commit"] for item in loaded} == {kernel.commit}
    remote = cli("verify", "--remote", cwd=project)
    assert remote.exit_code == 0 and "was renamed to kernels-community/flash-attn2 on the Hub" in remote.output
    outdated = cli("outdated", cwd=project)
    assert "renamed to kernels-community/flash-attn2" in outdated.output
