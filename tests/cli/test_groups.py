"""`[tool.kernlock.groups]` (issue 48 item 5): one lock records each entry's groups; `sync`, `verify`, `vendor`
and `apply(group=...)` act on a group (and the ungrouped entries) only."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from helpers import (
    ACTIVATION,
    CPU,
    CU128_ON_V2,
    CUDA_X86,
    FA2,
    RELU,
    REPO_ROOT,
    UNIVERSAL,
    WITH_DEP,
    cli,
    make_project,
    markdown_blocks,
    run_bash,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub

# universal: every run; training: activation, relu; inference: flash-attn2 and with-dep, whose
# kernel-depends is activation@v1 (so activation is in both groups)
GROUPS = f'''
[tool.kernlock.groups]
training = ["{ACTIVATION}@v1", "{RELU}@v1"]
inference = ["{FA2}@v2", "{WITH_DEP}@v1"]
'''


def two_group_project(root: Path) -> Path:
    project = make_project(root, [f"{UNIVERSAL}@v1"], targets=[CPU], extra=GROUPS)
    result = cli("lock", cwd=project)
    assert result.exit_code == 0, result.output
    return project


def test_one_lock_records_each_entrys_groups(hub: TestHub, tmp_path: Path) -> None:
    project = two_group_project(tmp_path / "p")
    lock = load_lockfile(project / "kernels.lock")
    assert lock.version == "1.7" and lock.groups == ("inference", "training")
    assert {k.repo: k.groups for k in lock.kernels} == {
        UNIVERSAL: (), ACTIVATION: ("inference", "training"), RELU: ("training",), FA2: ("inference",),
        WITH_DEP: ("inference",),
    }
    assert cli("lock", "--check", cwd=project).exit_code == 0
    # moving a spec to another group makes the lock stale, though its inputs are the same
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(
        text.replace(f'"{RELU}@v1"]', "]").replace(f'"{WITH_DEP}@v1"]', f'"{WITH_DEP}@v1", "{RELU}@v1"]'))
    stale = cli("verify", cwd=project)
    assert stale.exit_code == 1
    assert f"{RELU}@v1 is in group inference of [tool.kernlock.groups], the lock has it in group training" in stale.output
    assert cli("lock", "--check", cwd=project).exit_code == 1
    assert cli("lock", cwd=project).exit_code == 0
    assert load_lockfile(project / "kernels.lock").kernel(f"{RELU}@v1").groups == ("inference",)


def test_a_project_without_groups_writes_the_lock_it_wrote_before(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{ACTIVATION}@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    text = (project / "kernels.lock").read_text()
    assert 'version = "1.0"' in text and "groups" not in text
    # declaring a group and removing it again gives back the same bytes
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text() + GROUPS)
    assert cli("lock", cwd=project).exit_code == 0
    assert 'version = "1.7"' in (project / "kernels.lock").read_text()
    (project / "pyproject.toml").write_text((project / "pyproject.toml").read_text().replace(GROUPS, ""))
    assert cli("lock", cwd=project).exit_code == 0
    assert (project / "kernels.lock").read_text() == text


def test_sync_group_downloads_only_that_groups_builds(hub: TestHub, tmp_path: Path) -> None:
    project = two_group_project(tmp_path / "p")
    hub.reset_counts()
    result = cli("sync", "--group", "inference", "--json", cwd=project)
    assert result.exit_code == 0, result.output
    downloads = [path for method, path in hub.log if "/resolve/" in path]
    assert downloads and all(RELU not in path for path in downloads)
    fetched = {path.split("/resolve/")[0].removeprefix("/kernels/") for path in downloads}
    assert fetched == {FA2, WITH_DEP, ACTIVATION, UNIVERSAL}
    cache = Path(json.loads(result.output)["cache"])
    assert not any(cache.glob("kernels--kernels-community--relu")) and any(cache.glob("kernels--kernels-community--flash-attn2"))
    # verify --group inference checks the cache of what was synced; the whole lock's cache is not complete
    assert cli("verify", "--cache", "--group", "inference", cwd=project).exit_code == 0
    whole = cli("verify", "--cache", cwd=project)
    assert whole.exit_code == 1 and RELU in whole.output


def test_vendor_group_exports_only_that_group(hub: TestHub, tmp_path: Path) -> None:
    project = two_group_project(tmp_path / "p")
    result = cli("vendor", str(tmp_path / "v"), "--group", "training", "--json", cwd=project)
    assert result.exit_code == 0, result.output
    vendored = {p.name for p in (tmp_path / "v").glob("kernels--*")}
    assert vendored == {f"kernels--{repo.replace('/', '--')}" for repo in (UNIVERSAL, ACTIVATION, RELU)}
    assert (tmp_path / "v" / "kernels.lock").read_bytes() == (project / "kernels.lock").read_bytes()


@pytest.mark.parametrize("command", [["sync"], ["verify"], ["vendor", "out dir"]])
def test_an_unknown_group_is_one_line_with_a_fix_that_runs(hub: TestHub, tmp_path: Path, command: list[str]) -> None:
    project = two_group_project(tmp_path / "p")
    result = cli(*command, "--group", "inference", "--group", "traning", cwd=project)
    assert result.exit_code == 2
    [line] = result.output.splitlines()
    assert line.startswith("kernlock: error: unknown group 'traning' (did you mean training?); fix: run `")
    fix = line.split("fix: run `", 1)[1].rstrip("`")
    assert fix == f"kernlock {shlex.join(command)} --group inference --group training"
    assert cli(*shlex.split(fix)[1:], cwd=project).exit_code == 0


def test_an_unknown_group_of_a_lock_without_groups_says_how_to_declare_one(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [f"{ACTIVATION}@v1"], targets=[CPU])
    assert cli("lock", cwd=project).exit_code == 0
    result = cli("sync", "--group", "training", cwd=project)
    assert result.exit_code == 2
    assert result.output == (
        "kernlock: error: unknown group 'training' (groups of the lock: none); fix: declare it in "
        "[tool.kernlock.groups] and run `kernlock lock`\n"
    )


def test_apply_group_binds_only_that_group_and_the_ungrouped(hub: TestHub, tmp_path: Path,
                                                             release_and_unload_kernels: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import kernlock
    from kernlock.errors import UsageError

    project = two_group_project(tmp_path / "p")
    monkeypatch.chdir(project)
    applied = kernlock.apply(group="training", target=CPU)
    assert {spec.split("@")[0] for spec in applied.kernels} == {UNIVERSAL, ACTIVATION, RELU}
    monkeypatch.setenv("KERNLOCK_GROUPS", "inference")
    assert {spec.split("@")[0] for spec in kernlock.apply(target=CPU).kernels} == {UNIVERSAL, ACTIVATION, FA2, WITH_DEP}
    monkeypatch.setenv("KERNLOCK_GROUPS", "inferense")
    with pytest.raises(UsageError) as refused:
        kernlock.apply(target=CPU)
    assert refused.value.fix == "run `export KERNLOCK_GROUPS=inference`"
    with pytest.raises(UsageError) as refused:
        kernlock.apply(group=["trainin"], target=CPU)
    assert refused.value.fix == "run `kernlock.apply(group=['training'])`"


def test_a_bad_groups_table_is_one_line(hub: TestHub, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", [], targets=[CPU], extra='[tool.kernlock.groups]\ntraining = "org/repo"\n')
    result = cli("lock", cwd=project)
    assert result.exit_code == 2
    assert "[tool.kernlock.groups] training must be a list of spec strings; fix: write it as training = [" in result.output


TRAIN = '''import kernels
from kernlock.errors import UnlockedKernelError

kernels.get_kernel("kernels-community/activation", version=1)
kernels.get_kernel("kernels-community/relu", version=1)
try:
    kernels.get_kernel("kernels-community/flash-attn2", version=2)
except UnlockedKernelError as error:
    print("refused:", error)
'''


@pytest.mark.slow
def test_the_how_to_blocks_run_as_written(hub: TestHub, tmp_path: Path) -> None:
    """docs/how-to/groups.md: its `[tool.kernlock]` tables and its commands, verbatim; the training job downloads
    and binds no inference kernel, and the refusal reads as the page shows it."""
    page = (REPO_ROOT / "docs" / "how-to" / "groups.md").read_text()
    [config] = markdown_blocks(page, "toml")
    [block] = markdown_blocks(page, "bash")
    project = tmp_path / "job"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n\n' + config)
    (project / "train.py").write_text(TRAIN)
    first, *rest = block.splitlines()
    assert first == "kernlock lock" and run_bash(first, project).returncode == 0
    hub.reset_counts()  # locking reads every group's commits; the training job downloads no inference file
    done = run_bash("\n".join(rest), project)
    assert done.returncode == 0, done.stderr
    assert [path for _, path in hub.log if "/resolve/" in path and RELU in path]
    assert not [path for _, path in hub.log if "/resolve/" in path and FA2 in path]
    [refused] = [line for line in done.stdout.splitlines() if line.startswith("refused:")]
    shown = " ".join(markdown_blocks(page, "text")[0].split()).removeprefix("kernlock: error: ")
    assert refused == "refused: " + shown.replace("/job/kernels.lock", str(project / "kernels.lock"))
    lock = load_lockfile(project / "kernels.lock")
    assert {k.repo: k.groups for k in lock.kernels} == {ACTIVATION: (), RELU: ("training",), FA2: ("inference",)}


def test_tree_and_why_show_each_entrys_groups_and_tree_group_filters(hub: TestHub, tmp_path: Path) -> None:
    """As `uv tree` marks a group's packages: every entry with its groups, a group's spec as its source with its
    line, and `tree --group G` as `sync --group G` selects."""
    project = two_group_project(tmp_path / "p")
    hub.reset_counts()

    tree = cli("tree", cwd=project)

    assert tree.exit_code == 0, tree.output
    page = (REPO_ROOT / "docs" / "how-to" / "tree-why.md").read_text()
    assert tree.output.startswith(markdown_blocks(page, "text")[1])  # the how-to shows it as printed
    lines = tree.output.splitlines()
    heads = {line.split()[0]: line for line in lines if line.startswith("  kernels-community/")}
    assert heads[f"{ACTIVATION}@v1"].endswith("(groups: inference, training)")
    assert heads[f"{RELU}@v1"].endswith("(group: training)")
    assert heads[f"{UNIVERSAL}@v1"].endswith("torch-universal")  # ungrouped: every run, no mark
    assert (f'    <- group: pyproject.toml:10: "{RELU}@v1" in [tool.kernlock.groups] training'
            == lines[lines.index(heads[f"{RELU}@v1"]) + 1])
    activation = lines[lines.index(heads[f"{ACTIVATION}@v1"]) + 1:][:2]
    assert activation == [f'    <- group: pyproject.toml:10: "{ACTIVATION}@v1" in [tool.kernlock.groups] training',
                          f"    <- kernel-depends: a dependency of {WITH_DEP}@v1"]

    inference = cli("tree", "--group", "inference", "--json", cwd=project)
    assert inference.exit_code == 0, inference.output
    data = json.loads(inference.output)
    assert data["groups"] == ["inference", "training"]
    assert {k["repo"]: k["groups"] for k in data["kernels"]} == {
        UNIVERSAL: [], ACTIVATION: ["inference", "training"], FA2: ["inference"], WITH_DEP: ["inference"]}
    [fa2] = [k for k in data["kernels"] if k["repo"] == FA2]
    assert fa2["sources"] == [{"kind": "group", "text": f'"{FA2}@v2" in [tool.kernlock.groups] inference',
                               "where": "pyproject.toml:11"}]

    why = cli("why", RELU, "--json", cwd=project)
    assert why.exit_code == 0, why.output
    [relu] = json.loads(why.output)
    assert relu["groups"] == ["training"] and [s["kind"] for s in relu["sources"]] == ["group"]
    assert cli("why", RELU, cwd=project).output.splitlines()[0].endswith("(group: training)")
    assert sum(hub.requests.values()) == 0  # read from the project and the lock alone


def test_tree_an_unknown_group_is_one_line_whose_fix_runs(hub: TestHub, tmp_path: Path) -> None:
    project = two_group_project(tmp_path / "p")
    result = cli("tree", "--group", "traning", cwd=project)
    assert result.exit_code == 2
    assert result.output == ("kernlock: error: unknown group 'traning' (did you mean training?); fix: run "
                             "`kernlock tree --group training`\n")
    fixed = cli("tree", "--group", "training", cwd=project)
    assert fixed.exit_code == 0 and FA2 not in fixed.output and RELU in fixed.output


COMMENTED = f'''[project]
name = "demo"
version = "0"

[tool.kernlock]
kernels = ["{UNIVERSAL}@v1", "{FA2}@v2"]  # every run
targets = ["{CPU}"]

# one list per job
[tool.kernlock.groups]
training = [
    "{ACTIVATION}@v1",  # the MLP
    # relu: the baseline's activation
    "{RELU}@v1",
]
inference = ["{FA2}@v2"]   # serving
'''


def test_remove_drops_a_spec_from_every_group_keeping_the_rest_as_written(hub: TestHub, tmp_path: Path) -> None:
    """`kernlock remove SPEC` drops it wherever it is declared (kernels and every group), so its kernel leaves the
    lock; the user's other lines and comments stay, and a group emptied stays declared."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(COMMENTED)
    assert cli("lock", cwd=project).exit_code == 0

    relu = cli("remove", RELU, cwd=project)

    assert relu.exit_code == 0, relu.output
    assert (project / "pyproject.toml").read_text() == COMMENTED.replace(f'    "{RELU}@v1",\n', "")
    lock = load_lockfile(project / "kernels.lock")
    assert RELU not in {k.repo for k in lock.kernels} and lock.kernel(f"{ACTIVATION}@v1").groups == ("training",)

    fa2 = cli("remove", f"{FA2}@v2", cwd=project)  # in kernels and in inference

    assert fa2.exit_code == 0, fa2.output
    text = (project / "pyproject.toml").read_text()
    assert text == (COMMENTED.replace(f'    "{RELU}@v1",\n', "").replace(f', "{FA2}@v2"]  # every run', "]  # every run")
                    .replace(f'inference = ["{FA2}@v2"]   # serving', "inference = []   # serving"))
    lock = load_lockfile(project / "kernels.lock")
    assert FA2 not in {k.repo for k in lock.kernels} and lock.groups == ("inference", "training")
    assert cli("verify", cwd=project).exit_code == 0
    assert cli("sync", "--group", "inference", cwd=project).exit_code == 0  # a job choosing it still runs


def test_remove_group_drops_a_spec_from_that_group_only(hub: TestHub, tmp_path: Path) -> None:
    """As `uv remove --group`: the spec leaves that group; declared elsewhere too, its kernel stays locked, and an
    override of its repo stays while something declares the repo."""
    project = make_project(tmp_path / "p", [f"{FA2}@v2"], targets=[CPU, CUDA_X86],
                           extra=CU128_ON_V2 + f'\n[tool.kernlock.groups]\ninference = ["{FA2}@v2", "{UNIVERSAL}@v1"]\n')
    assert cli("lock", cwd=project).exit_code == 0
    before = (project / "pyproject.toml").read_text()

    result = cli("remove", "--group", "inference", FA2, cwd=project)

    assert result.exit_code == 0, result.output
    assert (project / "pyproject.toml").read_text() == before.replace(f'"{FA2}@v2", "{UNIVERSAL}', f'"{UNIVERSAL}')
    lock = load_lockfile(project / "kernels.lock")
    assert lock.kernel(f"{FA2}@v2", CPU).groups == ()  # ungrouped now: every run
    assert lock.kernel(f"{FA2}@v2", CUDA_X86).override is not None  # the override is kept
    assert cli("verify", "--all-targets", cwd=project).exit_code == 0


@pytest.mark.parametrize("args, fix", [
    (["--group", "training", f"{FA2}@v2"], f"it is in group inference: run `kernlock remove {FA2}@v2 --group inference`"),
    (["--group", "inferense", f"{FA2}@v2"], f"run `kernlock remove {FA2}@v2 --group inference`"),
    (["--group", "training", f"{UNIVERSAL}@v1"], f"it is declared ungrouped: run `kernlock remove {UNIVERSAL}@v1`"),
])
def test_remove_group_refusals_are_one_line_whose_fix_runs(hub: TestHub, tmp_path: Path, args: list[str],
                                                           fix: str) -> None:
    project = two_group_project(tmp_path / "p")
    before = [(project / name).read_bytes() for name in ("pyproject.toml", "kernels.lock")]

    result = cli("remove", *args, cwd=project)

    assert result.exit_code == 2
    [line] = result.output.splitlines()
    assert line.startswith("kernlock: error: ") and line.endswith(f"; fix: {fix}"), line
    assert [(project / name).read_bytes() for name in ("pyproject.toml", "kernels.lock")] == before
    command = fix.split("`")[1]
    fixed = cli(*shlex.split(command)[1:], cwd=project)
    assert fixed.exit_code == 0, fixed.output
    assert args[-1] not in (project / "pyproject.toml").read_text()
