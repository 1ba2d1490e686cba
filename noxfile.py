"""The version matrix: kernlock against the kernels, Transformers and huggingface_hub releases users have.

    nox -s matrix                 # every cell, one after another, then the support table (docs/reference/supported-versions.md)
    nox -s "matrix(k0.17.2-t5.22.2)"   # one cell
    nox -s "matrix(trl)"          # the newest TRL with its own pick of Transformers (and kernels)
    nox -s support_table          # rewrite docs/matrix.md and the support table from the last run

Each cell installs kernlock with its torch (2.13.0, the CPU wheel, unless the cell
names another: 2.14.1 and 2.15.0 are PyPI's CUDA wheels, which run on a CPU
machine), then the cell's kernels / Transformers / huggingface_hub releases on
top, the way a user's environment ends up. A torch pip cannot install here (this
machine's pip configuration caps it) is recorded as the cell's outcome, with
pip's reason and the cap, and the cell is skipped. TRL is then installed beside
the cell's versions where it can be, and `kernlock run -- trl sft` joins the slice. It asks
the compatibility doctor about the environment: when the doctor refuses, the
cell runs the doctor's fix with pip, which must make the doctor pass. Then it
runs a slice of the test suite (lock, verify, apply, a tiny training step,
strict refusal, the doctor, the compiled-op kernel). Each cell's outcome is
written to docs/matrix/<cell>.json; `make test` runs only the default cell's
versions (requirements-dev.txt).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "docs" / "matrix"
CONSTRAINTS = ROOT / "requirements-matrix.txt"

nox.options.sessions = ["matrix", "matrix(trl)", "support_table"]
nox.options.reuse_venv = "yes"

# (kernels, transformers or None, huggingface_hub or None for what pip picks, torch). Transformers
# declares the kernels it accepts in its `kernels` extra: 5.15-5.17 -> >=0.16.0,<0.17, 5.18-5.19 ->
# >=0.17.0,<0.18, 5.20-5.22 -> >=0.17.2,<0.18, 5.23-5.24 -> >=0.18.2,<0.19, 5.25 -> >=0.19.1,<0.20
# (5.25 requires it outright, so pip installs kernels 0.19.1 with it). kernels 0.17 needs
# huggingface_hub>=1.10, 0.18 and 0.19 >=1.32; Transformers 5.18+ needs >=1.31. Every kernels
# release in kernlock's window is a cell, each with the Transformers releases that accept it; the
# last two cells are environments the doctor refuses, and its fix must make them pass.
TORCH = "2.13.0"
CELLS = [
    ("0.19.1", "5.25.0", None, TORCH),  # the default cell: requirements-dev.txt
    ("0.19.1", "5.25.0", None, "2.15.0"),  # `pip install "trl[kernels]" torch` on PyPI today (CUDA 13.2)
    ("0.19.1", "5.25.0", None, "2.14.1"),  # the newest torch pip installs on this machine
    ("0.19.1", None, "1.32.0", TORCH),  # kernels alone, with the lowest huggingface_hub kernels 0.19 accepts
    ("0.18.3", "5.24.0", None, TORCH),
    ("0.18.3", "5.23.0", "1.32.0", TORCH),  # the lowest huggingface_hub kernels 0.18 accepts
    ("0.17.2", "5.22.2", None, TORCH),
    ("0.17.2", "5.22.2", None, "2.14.1"),  # what vllm 0.34 (torch 2.14) leaves beside trl
    ("0.17.2", "5.20.0", "1.31.0", TORCH),  # the lowest huggingface_hub Transformers 5.18+ accepts
    ("0.17.1", "5.19.0", None, TORCH),
    ("0.17.0", "5.18.0", None, TORCH),
    ("0.17.2", None, "1.10.0", TORCH),  # kernels alone, with the lowest huggingface_hub kernels 0.17 accepts
    ("0.16.2", "5.17.0", "1.33.0", TORCH),  # `pip install "trl[vllm,kernels]"`: vllm 0.31 pins transformers<5.18
    ("0.17.2", "5.17.0", "1.33.0", TORCH),  # kernels upgraded beside vllm's Transformers: refused, fixed in place
    ("0.17.2", "5.23.0", None, TORCH),
]

def _test_deps() -> tuple[str, ...]:
    """What the suite imports at collection beside kernlock (the slice is picked with -k, so every
    test module is imported): pyproject.toml's test extra, less pytest-xdist and pre-commit (the
    slice runs in one process, without the hook tests) and TRL with its datasets (installed beside
    each cell's versions below, where pip can)."""
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    left_out = {"pytest-xdist", "pre-commit", "trl", "datasets"}
    return tuple(d for d in extra if re.split(r"[\[<>=!~ ]", d, maxsplit=1)[0] not in left_out)


TEST_DEPS = _test_deps()

# The representative slice, by test name (stable across moves between test files).
SLICE = [
    "test_fresh_lock_passes_every_offline_check",  # lock -> verify
    "test_apply_before_or_after_importing_transformers",  # apply -> tiny training step; strict refusal
    "test_kernelize_uses_the_locked_layer_kernel",  # use_kernels / kernelize through the lock
    "test_direct_kernels_calls_bind_to_the_lock",  # get_kernel / has_kernel / get_kernel_variants
    "test_doctor_kernels_outside_transformers_window",  # the doctor, in verify and apply()
    "test_compiled_op",  # the kernel-builder layout fixture: a torch.ops C++ op through apply()
    "test_kernels_internal_holds",  # the adapter contract of this kernels line
    "test_another_lines_contract_names_exactly_what_moved",
    "test_backend_argument_binds_to_the_locked_target_or_is_refused",
    "test_a_locked_load_refuses_what_kernels_digest_check_refuses",  # never weaker than kernels 0.18+
    "test_a_locked_load_writes_no_receipts_and_never_verifies_online",
    "test_kernels_json_lock_is_refused_then_migrated_with_its_commits_kept",  # kernels' own JSON lock
    "test_export_for_kernels_never_overwrites_kernlocks_lock",
    "test_reset_mid_body_resumes_within_one_run",  # resumable downloads over httpx (hub 1.x) and httpx2 (2.x)
    "test_next_run_resumes_a_kept_partial",
]
# `kernlock run -- trl sft` through the locked kernel (the README's quick start), and its one-line refusal of an
# unlocked one with the lenient rerun it names: in every cell where TRL installs
TRL_TESTS = ["test_every_quick_start_block_runs_as_written", "test_a_refusal_inside_trl_sft_is_one_line_first_naming_the_lenient_rerun"]
TRANSFORMERS_TESTS = ["test_apply_before_or_after_importing_transformers", "test_doctor_kernels_outside_transformers_window"]

PROBE = (
    "import json; from kernlock._internal.rules.doctor import diagnose; "
    "print(json.dumps([[f.message, f.fix] for f in diagnose([], 'cpu') if f.blocking]))"
)
VERSIONS = (
    "import json, platform; from kernlock._internal.host import installed_version; "
    "print(json.dumps({'python': platform.python_version(), "
    "**{p: installed_version(p) for p in ('kernels', 'transformers', 'huggingface_hub', 'torch', 'trl')}}))"
)


def cell_id(kernels: str, transformers: str | None, hub: str | None, torch: str = TORCH) -> str:
    parts = [f"k{kernels}", f"t{transformers}" if transformers else "no-transformers"]
    return "-".join(parts + ([f"hub{hub}"] if hub else []) + ([f"torch{torch}"] if torch != TORCH else []))


def _kernlock_commit(session: nox.Session) -> str:
    """The commit under test, `-dirty` when the tree differs from it (the cells' own results in docs/matrix aside)."""
    commit = session.run("git", "rev-parse", "--short", "HEAD", external=True, silent=True).strip()
    changed = session.run("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/matrix",
                          ":(exclude)docs/reference/supported-versions.md", external=True, silent=True).strip()
    return f"{commit}-dirty" if changed else commit


def _json(session: nox.Session, code: str):
    return json.loads(session.run("python", "-c", code, silent=True).strip().splitlines()[-1])


@nox.session(python=False)
def support_table(session: nox.Session) -> None:
    """Rewrite docs/matrix.md and the support table from docs/matrix/*.json."""
    session.run(sys.executable, "scripts/support_table.py", external=True)


@nox.session
@nox.parametrize(("kernels", "transformers", "hub", "torch"), CELLS, ids=[cell_id(*cell) for cell in CELLS])
def matrix(session: nox.Session, kernels: str, transformers: str | None, hub: str | None, torch: str) -> None:
    """One cell: install, ask the doctor (and run its fix), run the slice; record the outcome."""
    record = {
        "cell": cell_id(kernels, transformers, hub, torch),
        "requested": {"kernels": kernels, "transformers": transformers, "huggingface_hub": hub, "torch": torch},
        "kernlock": _kernlock_commit(session),
        "refusal": None,
        "fix": None,
    }
    # the torch 2.13 cells keep the local CPU wheel (requirements-matrix.txt); the others name their torch
    constraints = ("-c", str(CONSTRAINTS)) if torch == TORCH else ()
    pins = [f"torch=={torch}"]
    if not _installs(session, record, *constraints, *pins, ".", *TEST_DEPS):
        return
    pins += [f"kernels=={kernels}"] + ([f"transformers=={transformers}"] if transformers else [])
    session.install(*constraints, *pins, *([f"huggingface_hub=={hub}"] if hub else []))
    if not transformers:
        session.run("pip", "uninstall", "--quiet", "--yes", "transformers")
    record["installed"] = _json(session, VERSIONS)
    if torch != TORCH:  # `pip install './kernlock[torch]'` beside this Torch must leave it in place
        report = Path(session.virtualenv.location) / "torch-extra.json"
        session.run("pip", "install", "--quiet", "--dry-run", "--report", str(report), ".[torch]", silent=True)
        moved = [i["metadata"]["version"] for i in json.loads(report.read_text())["install"] if i["metadata"]["name"] == "torch"]
        record["torch_extra_keeps_torch"] = not moved
        if moved:
            _finish(session, record, "fail", f"`pip install '.[torch]'` would replace torch {torch} with {moved[0]}")
    # TRL (and the datasets its sft command reads) beside the cell's versions, where pip can
    held = [f"{p}=={v}" for p, v in record["installed"].items() if v and p not in ("python", "trl")]
    if transformers and _installs(session, record, *_constraints(session, held), "trl", "datasets", trl=True):
        record["installed"] = _json(session, VERSIONS)
    _check_and_run(session, record, extra=TRL_TESTS if record["installed"]["trl"] else None)


def _constraints(session: nox.Session, pins: list[str]) -> tuple[str, ...]:
    """`-c FILE` holding `pins` (pip reads constraints from files only)."""
    path = Path(session.virtualenv.location) / "held.txt"
    path.write_text("\n".join(pins) + "\n")
    return ("-c", str(path))


def _installs(session: nox.Session, record: dict, *args: str, trl: bool = False) -> bool:
    """`pip install args`; where pip cannot, record why (and this machine's pip constraint, if any) and
    skip the cell, or for TRL (`trl=True`) note it and go on without TRL."""
    import subprocess

    python = str(Path(session.virtualenv.location) / "bin" / "python")
    done = subprocess.run([python, "-m", "pip", "install", "--quiet", *args], capture_output=True, text=True)
    if done.returncode == 0:
        return True
    output = done.stdout + done.stderr  # pip writes the conflict to stdout, its ERROR lines to stderr
    conflict = [line.strip() for line in output.splitlines() if line.strip().startswith("The user requested")]
    reason = "; ".join(conflict) or next(
        (line.strip() for line in reversed(done.stderr.splitlines()) if line.startswith("ERROR")), done.stderr.strip()[-300:])
    settings = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    for path in re.findall(r"^[\w:.]*constraint='([^']+)'", settings, re.MULTILINE):
        caps = [line for line in Path(path).read_text().splitlines() if line and not line.startswith("#")]
        reason += f"; this machine's pip configuration applies the constraints file {path} ({', '.join(caps)})"
    if trl:
        record["trl"] = f"not installed: {reason}"
        return False
    record.update(installed=None, outcome="could not install", problem=reason)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{record['cell']}.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    session.skip(f"{record['cell']}: {reason}")
    return False


@nox.session(name="matrix(trl)")
def matrix_trl(session: nox.Session) -> None:
    """The newest TRL with its own pick of Transformers, and kernels from kernlock's range: `pip install torch==2.13.0 . trl`."""
    session.install("-c", str(CONSTRAINTS), "torch==2.13.0", ".", "trl", *TEST_DEPS)
    record = {
        "cell": "trl",
        "requested": {"kernels": None, "transformers": None, "huggingface_hub": None, "trl": "newest"},
        "installed": _json(session, VERSIONS),
        "kernlock": _kernlock_commit(session),
        "refusal": None,
        "fix": None,
    }
    _check_and_run(session, record, extra=TRL_TESTS)


def _check_and_run(session: nox.Session, record: dict, extra: list[str] | None = None) -> None:
    """Ask the doctor (and run its fix, which must satisfy it), then run the slice; record the outcome."""
    from packaging.requirements import Requirement

    torch = record["requested"].get("torch", TORCH)
    constraints = ("-c", str(CONSTRAINTS)) if torch == TORCH else (f"torch=={torch}",)
    refusals = _json(session, PROBE)
    if refusals:
        record["refusal"], record["fix"] = refusals[0]
        command = shlex.split(record["fix"])
        if command[:2] != ["pip", "install"]:
            _finish(session, record, "fail", f"the doctor's fix is not a pip command: {record['fix']}")
        # the printed fix must install beside everything else the environment holds (what vllm pins, say):
        # `pip install --dry-run` with every installed package the fix does not name held where it is
        named = {Requirement(a).name.lower().replace("_", "-") for a in command[2:]}
        frozen = session.run("pip", "freeze", "--exclude-editable", silent=True).splitlines()
        held = [p for p in frozen if "==" in p and p.split("==")[0].lower().replace("_", "-") not in named]
        try:
            session.run("pip", "install", "--quiet", "--dry-run", *_constraints(session, held), *command[2:])
            record["fix_dry_run"] = 0
        except nox.command.CommandFailed:
            record["fix_dry_run"] = 1
            _finish(session, record, "fail", f"the doctor's fix does not install beside the environment: {record['fix']}")
        session.install(*constraints, *command[2:])
        record["fixed"] = _json(session, VERSIONS)
        if remaining := _json(session, PROBE):
            _finish(session, record, "fail", f"the doctor still refuses after its fix: {remaining}")
    tests = [*SLICE, *(extra or [])] if _json(session, VERSIONS)["transformers"] else [t for t in [*SLICE, *(extra or [])] if t not in TRANSFORMERS_TESTS]
    report = RESULTS / f"{record['cell']}.junit.xml"
    try:
        session.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", " or ".join(tests),
                    f"--junitxml={report}", "tests")
    except nox.command.CommandFailed:
        _finish(session, record, "fail", "the slice failed", report)
    _finish(session, record, "refused, fix works" if record["refusal"] else "pass", None, report)


def _finish(session: nox.Session, record: dict, outcome: str, problem: str | None, report: Path | None = None) -> None:
    if report is not None and report.exists():
        from xml.etree import ElementTree

        suite = ElementTree.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        record["slice"] = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
        report.unlink()
    record.update(outcome=outcome, problem=problem)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{record['cell']}.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if problem is not None:
        session.error(problem)
