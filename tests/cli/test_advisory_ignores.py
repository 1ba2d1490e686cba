"""Advisory ignores that expire (issue 48 item 4): `[tool.kernlock] ignore-advisories`, a plain id or
`{ id, until, reason }`, as cargo-deny's `[advisories] ignore`. The advisory is kernels-community#1085
(v3's cu128 build), from the bundled example file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from helpers import CUDA_130, CUDA_X86, FA2, REPO_ROOT, cli, make_project, markdown_blocks
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.fixtures import rev_parse
from kernlock.testing.hub import TestHub

V3 = f"{FA2}@v3"
ADVISORY = "KC-2026-1085"


def locked_v3(root: Path, ignore: str) -> Path:
    """A project locked to v3 everywhere before it declared the advisory, then declaring it and `ignore`."""
    project = make_project(root, kernels=[V3], targets=[CUDA_X86, CUDA_130])
    assert cli("lock", cwd=project).exit_code == 0
    shutil.copy(REPO_ROOT / "examples" / "advisories" / "kernels-community.toml", project / "advisories.toml")
    text = (project / "pyproject.toml").read_text()
    extra = f'advisories = ["advisories.toml"]\nignore-advisories = [{ignore}]\n'
    (project / "pyproject.toml").write_text(text.replace("[tool.kernlock]\n", "[tool.kernlock]\n" + extra))
    return project


def test_a_plain_id_ignores_the_advisory_in_verify_and_lock(hub: TestHub, tmp_path: Path) -> None:
    project = locked_v3(tmp_path / "p", f'"{ADVISORY}"')
    result = cli("verify", "--all-targets", cwd=project)
    assert result.exit_code == 0, result.output
    assert f"is advised by {ADVISORY}, which ignore-advisories ignores with no end date" in result.output
    assert cli("lock", cwd=project).exit_code == 0  # lock keeps the ignored build: no re-pin to v2
    assert load_lockfile(project / "kernels.lock").kernel(V3, CUDA_X86).commit == rev_parse(hub.repo_path(FA2), "v3")


def test_an_ignore_until_a_later_day_holds_and_an_expired_one_fails_verify(hub: TestHub, tmp_path: Path) -> None:
    """Ignored through its `until` day with its reason shown; once that day is past, verify fails with one
    line naming the line of pyproject.toml, and the fix it prints (a later until) makes it pass again."""
    reason = "our cu128 jobs only run inference"
    project = locked_v3(tmp_path / "p", f'{{ id = "{ADVISORY}", until = 2999-12-31, reason = "{reason}" }}')
    held = cli("verify", "--all-targets", cwd=project)
    assert held.exit_code == 0, held.output
    assert f"ignores until 2999-12-31: {reason}" in held.output

    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("until = 2999-12-31", 'until = "2026-01-31"'))
    line = next(n for n, text in enumerate(pyproject.read_text().splitlines(), 1) if ADVISORY in text)
    expired = cli("verify", "--all-targets", cwd=project)
    assert expired.exit_code == 1, expired.output
    problems = [text.strip() for text in expired.output.splitlines() if ADVISORY in text and "expired" in text]
    assert problems == [
        f"pyproject.toml:{line}: the ignore of advisory {ADVISORY} ({reason}) in [tool.kernlock] "
        "ignore-advisories expired on 2026-01-31; the advisory applies again"
    ]
    assert (f"fix: review {ADVISORY}, then set a later until on its entry in ignore-advisories or remove the "
            "entry") in expired.output
    assert "is advised by KC-2026-1085 (kernels-community#1085)" in expired.output  # in force again

    pyproject.write_text(pyproject.read_text().replace('until = "2026-01-31"', 'until = "2999-01-31"'))  # the fix
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0


def test_a_malformed_ignore_is_one_line_with_a_fix_that_works(hub: TestHub, tmp_path: Path) -> None:
    project = locked_v3(tmp_path / "p", f'{{ id = "{ADVISORY}", until = "end of January" }}')
    result = cli("verify", cwd=project)
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.endswith(
        "pyproject.toml: [tool.kernlock] ignore-advisories[0]: until = 'end of January' is not a date; "
        'fix: write the last day it is ignored as until = "YYYY-MM-DD"'
    ), line
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"end of January"', '"2999-01-31"'))
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0


def test_an_ignore_no_source_declares_is_a_note(hub: TestHub, tmp_path: Path) -> None:
    project = locked_v3(tmp_path / "p", f'"{ADVISORY}", "KC-2000-0001"')
    result = cli("verify", "--all-targets", cwd=project)
    assert result.exit_code == 0, result.output
    assert "ignore-advisories names KC-2000-0001, which no advisory source declares" in result.output


def test_the_how_tos_ignore_and_its_expiry_are_what_verify_does(hub: TestHub, tmp_path: Path) -> None:
    """docs/how-to/advisories.md: its ignore holds through its until day, and the failure it shows is verify's
    (here on a day past it: the same entry with an until already gone by)."""
    page = (REPO_ROOT / "docs" / "how-to" / "advisories.md").read_text()
    ignores = markdown_blocks(page, "toml")[2]
    [shown] = markdown_blocks(page, "text")
    entry = ignores.split("ignore-advisories = [\n", 1)[1].split("\n]", 1)[0].strip().rstrip(",")
    assert "2027-01-31" in entry
    held = locked_v3(tmp_path / "p", entry)
    assert cli("verify", "--all-targets", cwd=held).exit_code == 0  # before 2027-02-01
    gone = locked_v3(tmp_path / "q", entry.replace("2027-01-31", "2026-01-31"))
    result = cli("verify", "--all-targets", cwd=gone)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("FAIL advisories")))
    got = [re.sub(r"pyproject.toml:\d+", "pyproject.toml:N", line) for line in lines[start:start + 3]]
    want = [re.sub(r"pyproject.toml:\d+", "pyproject.toml:N", line).replace("2027-01-31", "2026-01-31")
            for line in shown.splitlines()]
    assert got == want
