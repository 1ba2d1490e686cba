"""`kernlock verify --format sarif`: the verify report as SARIF 2.1.0, for code-scanning pipelines
(GitHub code scanning, GitLab, Azure DevOps), as `uv audit --output-format sarif`.

Every problem is a result of level `error`, every note one of level `note`. Its rule is its check's
(`RULES`), or the one its `rule` context key names (`native-fallback`, `expired-ignore`). Rule ids
are stable across releases: a rule keeps its id for good, a new kind of finding gets the next
number, and no id is reused. A result's location is the line of `pyproject.toml` (or a scanned
file) that declares what it is about, else the line of its `[[kernel]]` entry (or variant, or
target) in `kernels.lock`; paths are relative to the project root (`PROJECTROOT`). The fix is in
the message and, with the context keys of `--json`, in the result's `properties`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernlock._internal.verify.report import VerifyReport

SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
ROOT_ID = "PROJECTROOT"


@dataclass(frozen=True)
class Rule:
    """A kind of finding: its stable id, its name and what it means."""

    id: str
    name: str
    summary: str


RULES = (  # never renumbered, never reused: tests/cli/test_verify_sarif.py pins them
    Rule("KL001", "invalid-lock", "kernels.lock does not parse, validate or hold all it names"),
    Rule("KL002", "stale-lock", "kernels.lock does not match the project's sources or targets"),
    Rule("KL003", "uncovered-target", "a kernel has no locked variant for a target"),
    Rule("KL004", "native-fallback", "a kernel's layers keep Transformers' own code on a target"),
    Rule("KL005", "unsupported-gpu-arch", "a locked build lacks a GPU architecture of its target"),
    Rule("KL006", "cannot-load-here", "this machine cannot load a locked variant"),
    Rule("KL007", "advised-build", "a locked build is covered by an advisory of the project"),
    Rule("KL008", "expired-ignore", "an advisory ignore is past its until date"),
    Rule("KL009", "cache-mismatch", "a locked variant is missing from the Hub cache or differs"),
    Rule("KL010", "signature-mismatch", "a signed variant does not verify as the lock records"),
    Rule("KL011", "hub-mismatch", "the Hub no longer holds the locked commit and files"),
    Rule("KL012", "run-record-mismatch", "the lock loads other builds than a checkpoint's run"),
)
CHECK_RULES = {
    "lock": "invalid-lock",
    "fresh": "stale-lock",
    "coverage": "uncovered-target",
    "gpu-archs": "unsupported-gpu-arch",
    "doctor": "cannot-load-here",
    "advisories": "advised-build",
    "cache": "cache-mismatch",
    "signatures": "signature-mismatch",
    "remote": "hub-mismatch",
    "against": "run-record-mismatch",
}


class _Lines:
    """Where things are declared: lines of kernels.lock and of pyproject.toml."""

    def __init__(self, report: VerifyReport) -> None:
        self.lock = _read_lines(report.lock_path)
        self.pyproject = _read_lines(report.root / "pyproject.toml") if report.root else []

    def entry(self, spec: str, variant: str | None, target: str | None) -> int | None:
        """The line of the `[[kernel]]` entry of `spec` (of its `variant`, or the one covering
        `target`)."""
        starts = [n for n, line in enumerate(self.lock) if line == f"spec = {json.dumps(spec)}"]
        for start in starts:
            end = next(
                (n for n in range(start + 1, len(self.lock)) if self.lock[n] == "[[kernel]]"), None
            )
            block = self.lock[start:end]
            if variant is not None and (at := _find(block, f"name = {json.dumps(variant)}")):
                return start + at
            if variant is None and (target is None or any(json.dumps(target) in x for x in block)):
                return start + 1
        return starts[0] + 1 if starts else None

    def target(self, target: str, pyproject: bool) -> int | None:
        lines = self.pyproject if pyproject else self.lock
        return _find(lines, json.dumps(target)) or _find(lines, "targets = ")


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def _find(lines: list[str], needle: str) -> int | None:
    """The 1-based number of the first line holding `needle`."""
    return next((n for n, line in enumerate(lines, 1) if needle in line), None)


def _location(
    report: VerifyReport, lines: _Lines, check: str, context: dict[str, Any]
) -> dict[str, Any]:
    path, line = report.lock_path, None
    spec = context.get("kernel") or context.get("spec")
    if context.get("file"):
        path, line = Path(os.path.abspath(context["file"])), context.get("line")
    elif spec:
        line = lines.entry(spec, context.get("variant"), context.get("target"))
    elif context.get("target"):
        in_pyproject = check == "fresh" and report.root is not None
        path = report.root / "pyproject.toml" if in_pyproject and report.root else path
        line = lines.target(context["target"], in_pyproject)
    physical: dict[str, Any] = {"artifactLocation": _artifact(path.resolve(), report.root)}
    if isinstance(line, int) and line > 0:
        physical["region"] = {"startLine": line}
    return {"physicalLocation": physical}


def _artifact(path: Path, root: Path | None) -> dict[str, str]:
    if root is not None and path.is_relative_to(root.resolve()):
        return {"uri": path.relative_to(root.resolve()).as_posix(), "uriBaseId": ROOT_ID}
    return {"uri": path.as_uri()}


def _result(
    rule: str, level: str, text: str, fix: str | None, context: dict[str, Any], location: dict
) -> dict[str, Any]:
    index = next(n for n, r in enumerate(RULES) if r.name == rule)
    return {
        "ruleId": RULES[index].id,
        "ruleIndex": index,
        "level": level,
        "message": {"text": f"{text} (fix: {fix})" if fix else text},
        "locations": [location],
        "properties": {**context, **({"fix": fix} if fix else {})},
    }


def sarif(report: VerifyReport) -> dict[str, Any]:
    """The SARIF 2.1.0 log of `report`: a run of kernlock, its rules and a result per finding."""
    from kernlock._internal.distribution import version

    lines, results = _Lines(report), []
    for check in report.checks:
        default = CHECK_RULES[check.name]
        for problem in check.problems:
            context = {"check": check.name, **problem.context}
            rule = context.pop("rule", default)
            location = _location(report, lines, check.name, context)
            results.append(_result(rule, "error", problem.message, problem.fix, context, location))
        for note in check.notes:
            context = {"check": check.name, **getattr(note, "context", {})}
            rule = context.pop("rule", default)
            location = _location(report, lines, check.name, context)
            results.append(_result(rule, "note", str(note), None, context, location))
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "kernlock",
                "version": version(),
                "rules": [
                    {
                        "id": rule.id,
                        "name": rule.name,
                        "shortDescription": {"text": rule.summary},
                        "defaultConfiguration": {"level": "error"},
                    }
                    for rule in RULES
                ],
            }
        },
        "invocations": [{"executionSuccessful": True, "exitCode": report.exit_code}],
        "results": results,
    }
    if report.root is not None:
        run["originalUriBaseIds"] = {ROOT_ID: {"uri": report.root.resolve().as_uri() + "/"}}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def sarif_json(report: VerifyReport) -> str:
    """The SARIF log as indented JSON text."""
    return json.dumps(sarif(report), indent=2)
