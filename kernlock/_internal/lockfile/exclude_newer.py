"""The lock's `[exclude-newer]`: the cut-offs (absolute dates) its resolution skipped Hub commits
after, and the relative settings (`span`) they were computed from, so a later re-lock reuses them
instead of moving with the clock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from datetime import datetime
from typing import Any

from kernlock._internal.lockfile.table import (
    Ignored,
    Table,
    ensure,
    get,
    invalid,
    model,
    type_error,
)
from kernlock._internal.spec.cooldown import parse_date, span_seconds


def _check_date(value: str, *key: str) -> None:
    try:
        parse_date(value)
    except ValueError as error:
        raise invalid(f"{value!r} {error}", *key) from None


def _check_span(value: str, *key: str) -> None:
    try:
        span_seconds(value)
    except ValueError as error:
        raise invalid(str(error), *key) from None


def _strings(d: Mapping[str, Any], key: str) -> dict[str, str]:
    table = get(d, dict, key) or {}
    for name, value in table.items():
        if not isinstance(value, str):
            raise type_error(value, str, key, name)
    return dict(table)


@model
class ExcludeNewer(Table):
    """`date`: the cut-off of every kernel without its own, from `span` when relative;
    `kernel-date`: per-repo cut-offs, `kernel-span` the relative ones' settings."""

    date: str | None = None  # RFC 3339, UTC (`format_date`)
    span: str | None = None  # ISO 8601 duration (`P7D`)
    kernel_date: Mapping[str, str] = field(default_factory=dict)
    kernel_span: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def _from_dict(cls, d: Mapping[str, Any], ignored: Ignored | None) -> ExcludeNewer:
        cls._check_keys(d, ignored)
        date, span = get(d, str, "date"), get(d, str, "span")
        if date is not None:
            _check_date(date, "date")
        if span is not None:
            _check_span(span, "span")
        kernel, spans = _strings(d, "kernel-date"), _strings(d, "kernel-span")
        for repo, value in kernel.items():
            _check_date(value, "kernel-date", repo)
        for repo, value in spans.items():
            _check_span(value, "kernel-span", repo)
            ensure(repo in kernel, "kernel-span", f"{repo!r} has a span but no kernel-date")
        return cls(date=date, span=span, kernel_date=kernel, kernel_span=spans)

    def cutoff(self, repo: str) -> datetime | None:
        """The cut-off that applied to `repo`'s commits (None: none)."""
        text = self.kernel_date.get(repo, self.date)
        return parse_date(text) if text is not None else None
