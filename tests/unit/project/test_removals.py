"""`kernlock remove`'s plan (kernlock._internal.project.removals), without the Hub: which sources lose a spec, and
when an override goes with it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kernlock._internal.project.config import load_project
from kernlock._internal.project.removals import removal

FA2 = "kernels-community/flash-attn2"
OVERRIDE = f'[[tool.kernlock.overrides."{FA2}"]]\nbackend = "cu128"\nrevision = "v2"\nreason = "v3 fails on CUDA 12.8"\n'


def _project(tmp_path: Path, groups: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.kernlock]\nkernels = ["{FA2}@v2"]\n{OVERRIDE}\n[tool.kernlock.groups]\n{groups}\n')
    return tmp_path


def _rerun(specs: Iterable[str], group: str | None) -> str:
    return " ".join(["kernlock remove", *specs, *(["--group", group] if group else [])])


def test_an_override_stays_while_a_group_still_declares_its_repo(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path, f'inference = ["{FA2}@v3"]'))
    edited, removed = removal(project, [f"{FA2}@v2"], None, _rerun)
    assert removed["kernels"] == [f"{FA2}@v2"] and removed["overrides"] == []
    assert edited.kernels == () and edited.groups == (("inference", (f"{FA2}@v3",)),) and edited.overrides

    edited, removed = removal(project, [FA2], None, _rerun)  # the repo: every spec of it, everywhere
    assert removed["groups.inference"] == [f"{FA2}@v3"] and removed["overrides"] == [FA2]
    assert edited.groups == (("inference", ()),) and edited.overrides == ()


def test_a_spec_listed_twice_in_a_group_goes_once_and_whole(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path, f'training = ["{FA2}@v2", "{FA2}@v2"]'))
    edited, removed = removal(project, [f"{FA2}@v2"], "training", _rerun)
    assert removed["groups.training"] == [f"{FA2}@v2"] and edited.groups == (("training", ()),)
    assert edited.kernels == (f"{FA2}@v2",) and removed["overrides"] == []
