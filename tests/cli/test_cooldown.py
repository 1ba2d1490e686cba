"""A cooldown (issue 48): `[tool.kernlock] exclude-newer` skips Hub commits newer than its cut-off, the lock
records the cut-off as a date, and `lock --check` gives the same answer on a later day."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from helpers import ACTIVATION, CPU, FA2, REPO_ROOT, cli, make_project, markdown_blocks
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.resolve import cooldown
from kernlock._internal.spec.cooldown import ACCEPTED
from kernlock.testing.fixtures import advance_branch, git, push_commit, rev_parse
from kernlock.testing.hub import TestHub

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
SPEC = f"{ACTIVATION}@v1"


def _at(monkeypatch: pytest.MonkeyPatch, moment: datetime) -> None:
    """Make `moment` the time relative cut-offs count back from."""
    monkeypatch.setattr(cooldown, "utc_now", lambda: moment)


def _project(root: Path, setting: str | None) -> Path:
    extra = f'exclude-newer = "{setting}"\n' if setting is not None else ""
    return make_project(root, kernels=[SPEC], targets=[CPU], extra=extra)


def _set(project: Path, setting: str) -> None:
    text = (project / "pyproject.toml").read_text()
    start = text.index("exclude-newer = ")
    end = text.index("\n", start)
    (project / "pyproject.toml").write_text(text[:start] + f'exclude-newer = "{setting}"' + text[end:])


@pytest.fixture
def day_old_head(hub: TestHub, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """activation's v1 (its commit, then from 2026-01-01) moved on a day before `NOW`, which is now:
    (the commit before, the head)."""
    repo = hub.repo_path(ACTIVATION)
    previous = rev_parse(repo, "v1")
    head = advance_branch(repo, "v1", date=NOW - timedelta(days=1))
    _at(monkeypatch, NOW)
    return previous, head


def _locked_commit(project: Path) -> str:
    [entry] = load_lockfile(project / "kernels.lock").kernels
    return entry.commit


def test_a_head_one_day_old_waits_under_seven_days_and_is_taken_under_zero(
    day_old_head: tuple[str, str], hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous, head = day_old_head
    project = _project(tmp_path / "p", "7 days")
    hub.reset_counts()

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == previous
    # one history listing carries the dates; the skipped head's tree is never listed
    api = {kind: n for kind, n in hub.requests.items() if kind not in ("resolve", "cdn", "agent-registry")}
    assert api == {"refs": 1, "commits": 1, "tree": 1, "overview": 1}, api
    lock = load_lockfile(project / "kernels.lock")
    assert lock.version == "1.5"
    assert lock.exclude_newer is not None
    assert (lock.exclude_newer.date, lock.exclude_newer.span) == ("2026-05-25T12:00:00Z", "P7D")
    text = (project / "kernels.lock").read_text()
    assert '[exclude-newer]\ndate = "2026-05-25T12:00:00Z"\nspan = "P7D"\n' in text
    assert "1 newer commit skipped (exclude-newer 2026-05-25T12:00:00Z)" in text

    # the next day the same settings give the same lock: the date is the lock's, not now - 7 days
    _at(monkeypatch, NOW + timedelta(days=1))
    checked = cli("lock", "--check", cwd=project)
    assert checked.exit_code == 0, checked.output
    assert (project / "kernels.lock").read_text() == text

    # a changed setting re-resolves: "0 days" is now, and the head is older than now
    _set(project, "0 days")
    relocked = cli("lock", cwd=project)
    assert relocked.exit_code == 0, relocked.output
    assert _locked_commit(project) == head
    assert f"{SPEC}  {previous[:12]} -> {head[:12]}" in relocked.output
    assert load_lockfile(project / "kernels.lock").exclude_newer.span == "PT0S"


def test_the_newest_older_commit_without_the_targets_build_is_passed_over(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = hub.repo_path(ACTIVATION)
    previous = rev_parse(repo, "v1")
    cpu_build = f"build/{CPU.replace('torch2.13', 'torch213')}"
    paths = git(repo, "ls-tree", "-r", "--name-only", previous, cpu_build).decode().split()
    assert paths
    push_commit(repo, "v1", dict.fromkeys(paths), "Drop the CPU build", NOW - timedelta(days=10))
    advance_branch(repo, "v1", date=NOW - timedelta(days=1))
    _at(monkeypatch, NOW)
    project = _project(tmp_path / "p", "P7D")

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == previous
    assert "2 newer commits skipped" in (project / "kernels.lock").read_text()


def test_the_command_line_value_replaces_the_projects(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    previous, head = day_old_head
    project = _project(tmp_path / "p", "7 days")

    assert cli("lock", "--exclude-newer", "24 hours", cwd=project).exit_code == 0
    assert _locked_commit(project) == head  # dated exactly 24 hours ago: at the cut-off is not newer
    assert cli("lock", "--exclude-newer", "2026-05-31", cwd=project).exit_code == 0
    assert _locked_commit(project) == previous
    assert load_lockfile(project / "kernels.lock").exclude_newer.date == "2026-05-31T00:00:00Z"


def test_a_per_repo_cooldown_applies_to_its_repo(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    previous, _ = day_old_head
    extra = f'exclude-newer = "0 days"\nexclude-newer-kernel = {{ "{ACTIVATION}" = "3 days" }}\n'
    project = make_project(tmp_path / "p", kernels=[SPEC], targets=[CPU], extra=extra)

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == previous
    cut = load_lockfile(project / "kernels.lock").exclude_newer
    assert cut is not None and cut.kernel_date == {ACTIVATION: "2026-05-29T12:00:00Z"}
    assert cut.kernel_span == {ACTIVATION: "P3D"}


def test_an_advisory_wins_over_the_cutoff(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    previous, head = day_old_head
    project = make_project(tmp_path / "p", kernels=[SPEC], targets=[CPU],
                           extra='exclude-newer = "7 days"\nadvisories = ["advisories.toml"]\n')
    (project / "advisories.toml").write_text(f'''
[[advisory]]
id = "ORG-2"
repo = "{ACTIVATION}"
summary = "this build is broken"
[advisory.affected]
commits = ["{previous}"]
''')

    result = cli("lock", cwd=project)

    assert result.exit_code == 0, result.output
    assert _locked_commit(project) == head  # the nearest good commit, though newer than the cut-off
    assert "advised by ORG-2" in result.output


def test_no_commit_old_enough_is_one_line_whose_fix_works(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(monkeypatch, datetime(2026, 1, 2, tzinfo=timezone.utc))  # the fixture commits are from 2026-01-01
    project = _project(tmp_path / "p", "7 days")

    result = cli("lock", cwd=project)

    assert result.exit_code == 1, result.output
    line, fix = result.output.strip().splitlines()[0], result.output.split("fix: ")[-1]
    assert "every commit of v1 is newer than the exclude-newer cut-off 2025-12-26T00:00:00Z" in line
    command = fix.split("`")[1]
    assert command == 'kernlock lock --exclude-newer "0 days"'
    fixed = cli(*shlex.split(command)[1:], cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert not (project / "kernels.lock").read_text().count("skipped")


@pytest.mark.parametrize("value", ["7 dayz", "yesterday", "2026-11-30T12:00:00"])
def test_a_bad_setting_is_one_line_naming_the_key(tmp_path: Path, value: str) -> None:
    project = _project(tmp_path / "p", value)

    result = cli("lock", cwd=project)

    assert result.exit_code == 2
    assert f"[tool.kernlock] exclude-newer: {value!r}" in result.output
    assert 'fix: write it as "7 days" (or a date, "2026-11-30")' in result.output


def test_fixture_commit_dates_reach_the_client_in_one_listing(tmp_path: Path) -> None:
    from kernlock._internal.hub.client import Hub
    from kernlock.testing.fixtures import build_fixture_repos, default_fixtures_dir

    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "templates").symlink_to(default_fixtures_dir() / "templates")
    (fixtures / "org__dated.toml").write_text('''repo = "org/dated"
template = "activation"
[[commits]]
label = "dated #1"
branch = "v1"
variants = ["torch213-cxx11-cpu-x86_64-linux"]
date = 2026-03-01T12:00:00Z
[[commits]]
label = "dated #2"
branch = "v1"
variants = ["torch213-cxx11-cpu-x86_64-linux"]
''')
    repos = build_fixture_repos(fixtures, tmp_path / "repos")
    with TestHub(repos, trusted_orgs={"org"}) as server:
        hub = Hub(endpoint=server.url)
        dated = hub.dated_commits("org/dated", "v1")
        assert [date for _, date in dated] == ["2026-01-01T02:00:00.000Z", "2026-03-01T12:00:00.000Z"]
        assert hub.commits("org/dated", "v1") == [commit for commit, _ in dated]
        assert server.requests["commits"] == 1  # memoised: the second call asked nothing


def test_verify_finds_a_lock_whose_cutoff_the_settings_no_longer_ask_for(day_old_head: tuple[str, str],
                                                                         tmp_path: Path) -> None:
    project = _project(tmp_path / "p", "7 days")
    assert cli("lock", cwd=project).exit_code == 0
    assert cli("verify", cwd=project).exit_code == 0

    _set(project, "3 days")
    stale = cli("verify", cwd=project)

    assert stale.exit_code == 1, stale.output
    assert ("[tool.kernlock] exclude-newer changed: the lock was resolved under 2026-05-25T12:00:00Z (P7D)"
            in stale.output)
    assert cli("lock", cwd=project).exit_code == 0  # the fix verify names
    assert cli("verify", cwd=project).exit_code == 0


def _row(output: str) -> str:
    [row] = [line for line in output.splitlines() if line.startswith(SPEC)]
    return row


def test_outdated_reports_a_head_newer_than_the_cutoff_as_held_back_naming_the_date(
    day_old_head: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous, head = day_old_head
    project = _project(tmp_path / "p", "7 days")
    assert cli("lock", cwd=project).exit_code == 0

    held = cli("outdated", "--exit-code", cwd=project)

    assert held.exit_code == 0, held.output  # held back is not an update
    page = (REPO_ROOT / "docs" / "how-to" / "cooldown.md").read_text()
    assert held.output == markdown_blocks(page, "text")[1]  # the how-to shows it as printed
    assert _row(held.output).endswith(f"branch v1 moved to {head[:12]}, newer than the exclude-newer cut-off "
                                      "2026-05-25T12:00:00Z: held back by the cooldown")
    [status] = json.loads(cli("outdated", "--json", cwd=project).output)
    assert (status["exclude_newer"], status["held_back"], status["cooldown_commit"], status["current"]) == (
        "2026-05-25T12:00:00Z", True, previous, head)

    # --exclude-newer replaces the settings, as lock's does: "0 days" takes the head, and the row's fix does
    floated = cli("outdated", "--exclude-newer", "0 days", "--exit-code", cwd=project)
    assert floated.exit_code == 1, floated.output
    fix = _row(floated.output).split("branch moved; ", 1)[1]
    assert fix == f"kernlock lock -P {ACTIVATION} --exclude-newer '0 days'"
    assert cli(*shlex.split(fix)[1:], cwd=project).exit_code == 0
    assert _locked_commit(project) == head


def test_outdated_under_a_cooldown_names_the_relock_that_counts_the_cutoff_again(
    day_old_head: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight days on the head is older than the cut-off counted from now, but `lock -P` keeps the lock's date: the
    fix is `lock --upgrade`, and it takes the head."""
    _, head = day_old_head
    project = _project(tmp_path / "p", "7 days")
    assert cli("lock", cwd=project).exit_code == 0
    _at(monkeypatch, NOW + timedelta(days=8))

    result = cli("outdated", "--exit-code", cwd=project)

    assert result.exit_code == 1, result.output
    assert _row(result.output).endswith("branch moved; kernlock lock --upgrade")
    assert cli("lock", "-P", ACTIVATION, cwd=project).exit_code == 0
    assert _locked_commit(project) != head  # what the -P fix would have left
    assert cli("lock", "--upgrade", cwd=project).exit_code == 0
    assert _locked_commit(project) == head


def test_outdated_under_a_cooldown_names_the_commit_a_relock_takes_below_a_newer_head(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = hub.repo_path(ACTIVATION)
    middle = advance_branch(repo, "v1", date=NOW - timedelta(days=10))
    head = advance_branch(repo, "v1", date=NOW - timedelta(days=1))
    _at(monkeypatch, NOW - timedelta(days=12))
    project = _project(tmp_path / "p", "7 days")
    assert cli("lock", cwd=project).exit_code == 0
    locked = _locked_commit(project)
    assert locked not in (middle, head)
    _at(monkeypatch, NOW)

    result = cli("outdated", "--exit-code", cwd=project)

    assert result.exit_code == 1, result.output
    assert _row(result.output).endswith(
        f"branch moved to {head[:12]}, newer than the exclude-newer cut-off 2026-05-25T12:00:00Z; a re-lock takes "
        f"{middle[:12]}: kernlock lock --upgrade")
    assert cli("lock", "--upgrade", cwd=project).exit_code == 0
    assert _locked_commit(project) == middle


def test_outdated_with_a_bad_exclude_newer_is_one_line(day_old_head: tuple[str, str], tmp_path: Path) -> None:
    project = _project(tmp_path / "p", "7 days")
    assert cli("lock", cwd=project).exit_code == 0
    result = cli("outdated", "--exclude-newer", "7 dayz", cwd=project)
    assert result.exit_code == 2
    assert result.output == ("kernlock: error: --exclude-newer: '7 dayz' is not " + ACCEPTED + '; fix: write it as '
                             '"7 days" (or a date, "2026-11-30")\n')


def test_outdated_holds_back_a_newer_version_with_no_commit_older_than_the_cutoff(
    hub: TestHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixtures' v3 and v4 of flash-attn2 are from 2026-01-01: a week later they are versions to take, four days
    later the cooldown holds them back."""
    project = make_project(tmp_path / "p", kernels=[f"{FA2}@v2"], targets=[CPU], extra='exclude-newer = "7 days"\n')
    _at(monkeypatch, NOW)
    assert cli("lock", cwd=project).exit_code == 0
    assert cli("outdated", "--exit-code", cwd=project).exit_code == 1  # v4 is there, and old enough
    _at(monkeypatch, datetime(2026, 1, 5, tzinfo=timezone.utc))

    result = cli("outdated", "--exit-code", cwd=project)

    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if line.startswith(f"{FA2}@v2")]
    assert row.endswith("v3, v4 held back by the cooldown (no commit from before the exclude-newer cut-off "
                        "2025-12-29T00:00:00Z with a build for the targets)")
    [status] = json.loads(cli("outdated", "--json", cwd=project).output)
    assert status["held_versions"] == [3, 4] and status["usable_version"] is None
