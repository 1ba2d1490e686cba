"""The result of `kernlock verify`: checks, their problems (each with its fix) and notes.

JSON form (`VerifyReport.to_json()`, `kernlock verify --json`)::

    {
      "ok": bool,                      # every check passed
      "lockfile": str,                 # path of the checked lock
      "checks": [
        {
          "name": "lock" | "fresh" | "coverage" | "doctor" | "cache" | "signatures" | "remote",
          "ok": bool,
          "summary": str,              # e.g. "7 specs", "3 targets"
          "problems": [                # empty when ok
            {"message": str, "fix": str,
             # optional context keys, present where they apply:
             "spec": str, "kernel": str, "target": str, "file": str, "line": int,
             "variant": str, "path": str, "advisory": str,
             "rule": str,                # a finding of its own kind (`expired-ignore`), for SARIF
             "key_path": [str | int]}    # where in the lock an invalid value is
             (LockfileError.key_path)
          ],
          "notes": [str]               # informational, never fail the check
        }
      ]
    }

`kernlock verify --format sarif` writes the same report as SARIF 2.1.0
(`kernlock._internal.verify.sarif`).

Exit codes (`VerifyReport.exit_code`): 0 all good, 1 a check failed, 2 the lock
is unreadable or invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernlock._internal.rules.findings import CheckResult


@dataclass
class VerifyReport:
    """Every check that ran, in order."""

    lock_path: Path
    root: Path | None = None  # the project's root, where SARIF's paths start
    checks: list[CheckResult] = field(default_factory=list)
    unreadable: bool = False

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return 2
        return 0 if self.ok else 1

    def check(self, name: str) -> CheckResult | None:
        """The result of the check called `name`, if it ran."""
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "lockfile": str(self.lock_path),
            "checks": [c.to_json() for c in self.checks],
        }

    def format(self) -> str:
        """Human-readable report: one line per check, problems indented with their fix."""
        lines = []
        for check in self.checks:
            if check.ok:
                lines.append(
                    f"ok   {check.name}" + (f" ({check.summary})" if check.summary else "")
                )
            else:
                count = len(check.problems)
                lines.append(
                    f"FAIL {check.name}: {count} problem{'s' if count != 1 else ''}"
                    + (f" ({check.summary})" if check.summary else "")
                )
            for problem in check.problems:
                lines.append(f"     {problem.message}")
                if problem.fix:
                    lines.append(f"       fix: {problem.fix}")
            for note in check.notes:
                lines.append(f"     note: {note}")
        return "\n".join(lines)


def report_json(report: VerifyReport) -> str:
    """The report as indented JSON text."""
    import json  # only `--json` needs it

    return json.dumps(report.to_json(), indent=2)


__all__ = ["VerifyReport", "report_json"]
