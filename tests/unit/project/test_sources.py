"""Project sources without the Hub: scanning code and configs, pyproject parsing, the lock path."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernlock._internal.project.config import find_project_root, load_project, project_specs
from kernlock._internal.project.scan import scan_paths
from kernlock._internal.project.workspace import LOCKFILE_ENV, check_lock_path, open_workspace
from kernlock.errors import ConfigError, LockfileError, SpecError

FA2 = "kernels-community/flash-attn2"


def test_scan_finds_kernels_in_python_yaml_and_shell(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        f'cfg = {{"attn_implementation": "{FA2}@v2"}}\nmodel.config.attn_implementation = "sdpa"\n'
        'load(attn_implementation="kernels-community/activation:silu")\n'
    )
    (tmp_path / "sft.yaml").write_text("attn_implementation: kernels-community/tagged@v1\n")
    (tmp_path / "launch.sh").write_text("trl sft --attn-implementation=kernels-community/universal\n")
    found = {(s.key, Path(s.origin.where).name, s.origin.line) for s in scan_paths([tmp_path])}
    assert found == {
        (f"{FA2}@v2", "train.py", 1), ("kernels-community/activation", "train.py", 3),
        ("kernels-community/tagged@v1", "sft.yaml", 1), ("kernels-community/universal", "launch.sh", 1),
    }


def test_a_bad_spec_in_code_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text('\n\nload(attn_implementation="org/@v1")\n')
    with pytest.raises(SpecError, match=r"train.py:3"):
        scan_paths([tmp_path / "train.py"])


def test_pyproject_sources_are_merged_with_their_lines(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.kernlock]\nkernels = ["{FA2}@v2"]\n\n[tool.kernels.dependencies]\n"kernels-community/activation" = 1\n'
    )
    specs = project_specs(load_project(tmp_path))
    assert [(s.key, s.origin.line) for s in specs] == [(f"{FA2}@v2", 2), ("kernels-community/activation@v1", 5)]


@pytest.mark.parametrize("text, problem", [
    ("[tool.kernlock]\nkernel = []\n", "unknown key [tool.kernlock] kernel"),
    ("[tool.kernlock]\nkernels = \"x\"\n", "kernels must be a list of strings"),
    ("[tool.kernlock]\nlockfile = 3\n", "lockfile must be a file name"),
    ("[tool.kernlock\n", "not valid TOML"),
])
def test_bad_configuration_is_a_config_error(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError, match=re.escape(problem)):
        load_project(tmp_path)


def test_the_project_root_is_the_nearest_marker(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    repo = tmp_path / "sub" / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    assert find_project_root(repo / "src") == repo
    assert find_project_root(tmp_path / "sub") == tmp_path


def test_the_lock_path_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kernlock]\nlockfile = "locks/k.lock"\n')
    monkeypatch.delenv(LOCKFILE_ENV, raising=False)
    monkeypatch.delenv("KERNLOCK_VENDOR_DIR", raising=False)
    assert open_workspace(tmp_path).lock_path == tmp_path / "locks" / "k.lock"
    assert open_workspace(tmp_path).discovered
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    (vendor / "kernels.lock").write_text("")
    monkeypatch.setenv("KERNLOCK_VENDOR_DIR", str(vendor))
    assert open_workspace(tmp_path).lock_path == vendor / "kernels.lock"
    assert open_workspace(tmp_path, readers=False).lock_path == tmp_path / "locks" / "k.lock"
    monkeypatch.setenv(LOCKFILE_ENV, str(tmp_path / "env.lock"))
    assert open_workspace(tmp_path).lock_path == tmp_path / "env.lock"
    named = open_workspace(tmp_path, tmp_path / "arg.lock")
    assert named.lock_path == tmp_path / "arg.lock" and not named.discovered


def test_a_lock_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kernels.lock").mkdir()
    with pytest.raises(LockfileError, match=r"is a directory, not a lock file; fix: move it away"):
        check_lock_path(tmp_path / "kernels.lock", discovered=False)
    os.rmdir(tmp_path / "kernels.lock")
    check_lock_path(tmp_path / "kernels.lock", discovered=True)  # absent: nothing to refuse


@pytest.mark.parametrize(("config", "environment", "allowed"), [
    (None, "", False),  # no pyproject.toml beside the lock
    ("", "", False),
    ("allow-mixed-variants = false\n", "", False),
    ("allow-mixed-variants = true\n", "", True),
    ("allow-mixed-variants = true\n", "0", False),  # the environment wins
    ("allow-mixed-variants = false\n", "1", True),
])
def test_mixed_variants_are_allowed_by_config_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             config: str | None, environment: str, allowed: bool) -> None:
    from kernlock._internal.runtime.rank_guard import MIXED_ENV, mixed_variants_allowed

    if config is not None:
        (tmp_path / "pyproject.toml").write_text("[tool.kernlock]\n" + config)
    monkeypatch.setenv(MIXED_ENV, environment)
    assert mixed_variants_allowed(tmp_path / "kernels.lock") is allowed


def test_mixed_variants_setting_is_read_for_a_configured_lock_in_a_subdirectory(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from kernlock._internal.runtime.rank_guard import MIXED_ENV, mixed_variants_allowed

    (tmp_path / "pyproject.toml").write_text('[tool.kernlock]\nlockfile = "locks/k.lock"\nallow-mixed-variants = true\n')
    (tmp_path / "locks").mkdir()
    monkeypatch.delenv(MIXED_ENV, raising=False)
    assert mixed_variants_allowed(tmp_path / "locks" / "k.lock") is True


def test_allow_mixed_variants_must_be_a_boolean(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kernlock]\nallow-mixed-variants = "yes"\n')
    with pytest.raises(ConfigError, match=r"allow-mixed-variants must be true or false"):
        load_project(tmp_path)
