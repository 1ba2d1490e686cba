"""Typos are caught with a suggestion (issue 46, item 6): a misspelled command, `[tool.kernlock]` key and
`[tool.kernlock]` table; a misspelled key's fix renames it and keeps what it held."""

from __future__ import annotations

import re
from pathlib import Path

import tomlkit

from helpers import CPU, UNIVERSAL, cli, make_project
from kernlock.testing.hub import TestHub


def _pyproject(root: Path, table: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "0"\n\n{table}\n')
    return root


def test_a_misspelled_command_gets_a_suggestion() -> None:
    result = cli("lok")
    assert result.exit_code == 2 and "No such command 'lok'. Did you mean 'lock'?" in result.output, result.output
    assert "Did you mean" not in cli("frobnicate").output  # nothing near: no guess


def test_a_misspelled_kernlock_table_is_refused_not_ignored(tmp_path: Path) -> None:
    project = _pyproject(tmp_path / "p", f'[tool.kernlok]\nkernels = ["{UNIVERSAL}@v1"]\ntargets = ["{CPU}"]')
    result = cli("lock", cwd=project)
    assert result.exit_code != 0, result.output  # was: "no kernel specs found"
    assert "[tool.kernlok] is not read by kernlock (did you mean [tool.kernlock]?)" in result.output, result.output
    assert "fix: rename the table [tool.kernlok] to [tool.kernlock] in pyproject.toml" in result.output
    assert not (project / "kernels.lock").exists()


def test_a_misspelled_key_is_named_with_its_suggestion_and_the_fix_keeps_the_value(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", kernels=[f"{UNIVERSAL}@v1"], targets=[CPU])
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("\ntargets =", "\ntarget ="))
    result = cli("lock", cwd=project)
    assert result.exit_code != 0 and "unknown key [tool.kernlock] target (did you mean targets?)" in result.output
    fix = re.search(r"fix: rename (\S+) to (\S+) in \[tool\.kernlock\]", result.output)
    assert fix is not None and fix.groups() == ("target", "targets"), result.output
    # the fix, applied as data: the key renamed, its value kept
    document = tomlkit.parse((project / "pyproject.toml").read_text())
    table = document["tool"]["kernlock"]  # type: ignore[index]
    table[fix.group(2)] = table.pop(fix.group(1))  # type: ignore[union-attr]
    (project / "pyproject.toml").write_text(tomlkit.dumps(document))
    assert cli("lock", cwd=project).exit_code == 0
    assert f'targets = ["{CPU}"]' in (project / "pyproject.toml").read_text()
