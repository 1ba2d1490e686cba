"""The `against` check: would the lock load exactly what a checkpoint's run loaded (its
`kernlock.json`)?

For every kernel the run recorded, the lock's entry for that repo covering the run's
target must pin the same commit and variant with the same content hash. No network.
"""

from __future__ import annotations

from pathlib import Path

from kernlock._internal.check.report import CheckResult, plural
from kernlock._internal.lockfile.model import Lockfile
from kernlock._internal.lockfile.record import RECORD_FILENAME, read_record, variant_content
from kernlock._internal.model.target import parse_target


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
        if (entry.commit, locked.name, variant_content(locked)) != (
            commit,
            variant,
            kernel.get("content"),
        ):
            same = entry.commit == commit and locked.name == variant
            now = f"{entry.commit[:12]} [{locked.name}]" + (" with other files" if same else "")
            result.problem(f"{was}; the lock now loads {now}", fix, kernel=repo)
    result.summary = f"{plural(len(record['kernels']), 'kernel')} of {path} on {target}"
