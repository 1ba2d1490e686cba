"""What a rule finds: each problem with its fix, and notes that never fail (the `verify` report,
`doctor` and the guards all collect them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    """One failed expectation and the command that fixes it."""

    message: str
    fix: str | None
    context: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "fix": self.fix, **self.context}


class Note(str):
    """A note's text, with the context keys (`kernel`, `target`, `rule`) SARIF places it by."""

    context: dict[str, Any]

    def __new__(cls, text: str, **context: Any) -> Note:
        note = super().__new__(cls, text)
        note.context = {k: v for k, v in context.items() if v is not None}
        return note


@dataclass
class CheckResult:
    """The outcome of one check."""

    name: str
    summary: str = ""
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, message: str, fix: str | None, **context: Any) -> None:
        self.problems.append(
            Problem(message, fix, {k: v for k, v in context.items() if v is not None})
        )

    def note(self, text: str, **context: Any) -> None:
        """A note that says what it is about (`Note`)."""
        self.notes.append(Note(text, **context))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "summary": self.summary,
            "problems": [p.to_json() for p in self.problems],
            "notes": list(self.notes),
        }
