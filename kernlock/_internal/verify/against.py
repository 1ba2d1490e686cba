"""The `against` check: would the lock load exactly what a checkpoint's run loaded (its
`kernlock.json`)?

For every kernel the run recorded, the lock's entry for that repo covering the run's
target must pin the same files, by sha256: a move to a commit whose build is byte for byte
the same passes, and a changed file is named (from the record's per-file `files`). No network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernlock._internal.lockfile.entries import LockedFile, Lockfile
from kernlock._internal.lockfile.run_record import RECORD_FILENAME, read_record, variant_content
from kernlock._internal.rules.findings import CheckResult
from kernlock._internal.spec.target import parse_target
from kernlock._internal.wording import plural


def check_against(lock: Lockfile, path: Path, result: CheckResult) -> None:
    """Each kernel `path`'s run loaded ↔ what `lock` loads for the run's target."""
    try:
        record = read_record(path)
        target = parse_target(record["target"])
    except (OSError, ValueError) as error:
        result.problem(
            f"{path}: no readable {RECORD_FILENAME} ({error})",
            f"name a checkpoint written under kernlock (it holds {RECORD_FILENAME})",
            path=str(path),
        )
        return
    fix = (
        "use the kernels.lock the run was trained with (sha256 "
        f"{str(record.get('lock-sha256'))[:12]}…, recorded in {path}), e.g. from version control"
        + _restore(record)
    )
    for kernel in record["kernels"]:
        repo, commit, variant = kernel["repo"], kernel["commit"], kernel["variant"]
        was = f"{path} loaded {repo} {commit[:12]} [{variant}]"
        entries = [e for e in lock.for_repo(repo) if e.variant_for(target) is not None]
        entry = next(
            (e for e in entries if e.spec == kernel.get("spec")), entries[0] if entries else None
        )
        if entry is None:
            result.problem(
                f"{was}; the lock holds no build of {repo} for {target}", fix, kernel=repo
            )
            continue
        locked = entry.variant_for(target)
        assert locked is not None  # entries were chosen covering the target
        if variant_content(locked) == kernel.get("content"):
            continue  # what ran, byte for byte, whatever commit now holds it
        now = f"{entry.commit[:12]} [{locked.name}]" + _changed(kernel.get("files"), locked.files)
        result.problem(f"{was}; the lock now loads {now}", fix, kernel=repo)
    result.summary = f"{plural(len(record['kernels']), 'kernel')} of {path} on {target}"


def _changed(recorded: Any, files: tuple[LockedFile, ...]) -> str:
    """`, whose <file> differs (and N more)` from the record's per-file sha256 (`files`), or where
    the record has none, ` with other files`."""
    if not isinstance(recorded, dict):
        return " with other files"
    now = {f.path: f.sha256 for f in files}
    changed = sorted(p for p in {*recorded, *now} if recorded.get(p) != now.get(p))
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    return f", whose {changed[0]} differs{more}" if changed else " with other files"


def _restore(record: dict[str, Any]) -> str:
    """`: git commit C holds it (`git restore …`)` where the run's lock lies in a git checkout."""
    from kernlock._internal.verify.lock_history import commit_holding

    lockfile, sha256 = record.get("lockfile"), record.get("lock-sha256")
    if not isinstance(lockfile, str) or not isinstance(sha256, str):
        return ""
    commit = commit_holding(Path(lockfile), sha256)
    if commit is None:
        return ""
    restore = f"git restore --source={commit[:12]} -- {lockfile}"
    return f": git commit {commit[:12]} holds it (`{restore}`)"
