"""Why a locked commit has no build for a target, and the version that has one: the no-variant
refusal, every kernel × target without a build at once, one line each (as uv and pip-tools report
every conflict in one pass)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import Ref
from kernlock._internal.hub.variants import choose_variant
from kernlock._internal.spec.kernel_spec import version_of_branch
from kernlock._internal.spec.target import Target
from kernlock.errors import NoVariantError, ResolutionError

_MISMATCH = re.compile(r"^(.+?) \((.+?)\) does not match (?:environment |system )?.*?\((.+?)\)$")
_NEAREST = 2  # builds named per line


@dataclass(frozen=True)
class MissingBuild:
    """One kernel × target without a build: the builds nearest to it, and a version that has one."""

    spec: str
    repo: str
    commit: str
    target: str
    reasons: tuple[str, ...]  # every build of the commit with kernels' reason for refusing it
    has_build: str | None = None  # `org/repo@v4`, a version with a build for the target
    build: str | None = None  # that version's build for it

    @property
    def nearest(self) -> list[tuple[str, str]]:
        """Up to two refused builds nearest the target (those refused for their Torch version
        first, newest first), each with its reason in one short clause."""
        parsed = [(reason.partition(": ")[0], reason.partition(": ")[2]) for reason in self.reasons]
        parts = set(self.target.split("-")[1:])  # its ABI, backend, CPU and OS
        ranked = sorted(
            parsed,
            key=lambda item: (
                not item[1].startswith("Torch version"),
                -len(parts & set(item[0].split("-"))),
                _minus(item[0]),
            ),
        )
        return [(name, short_reason(why)) for name, why in ranked[:_NEAREST]]

    @property
    def clause(self) -> str:
        """What is known of a build elsewhere, in one short clause."""
        if self.has_build is not None:
            return f"{self.has_build} has {self.build} for it"
        return "no version branch has one"

    @property
    def fix(self) -> str:
        if self.has_build is not None:
            return f"pin {self.has_build} in its spec and run `kernlock lock`, or drop the target"
        return "drop the target (no version branch has a build for it)"

    def line(self) -> str:
        """`kernel (commit) has no build for target: nearest builds (why); a version that has
        one`."""
        nearest = ", ".join(f"{name} ({why})" for name, why in self.nearest) or "no builds"
        return (
            f"{self.spec} ({self.commit[:12]}) has no build for {self.target}: nearest "
            f"{nearest}; {self.clause}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.spec,
            "repo": self.repo,
            "commit": self.commit,
            "target": self.target,
            "nearest": [{"variant": name, "why": why} for name, why in self.nearest],
            "reasons": list(self.reasons),
            "has_build": self.has_build,
            "build": self.build,
            "clause": self.clause,
            "fix": self.fix,
        }


def _minus(name: str) -> tuple[int, ...]:
    """A sort key: the newest Torch of a variant name first (`torch213-…` before `torch29`)."""
    found = re.match(r"torch-?(\d)\.?(\d+)", name)
    return (-int(found.group(1)), -int(found.group(2))) if found else (0,)


def short_reason(reason: str) -> str:
    """kernels' reason in one short clause: `Torch version (2.12) does not match environment Torch
    version (2.13)` → `Torch 2.12, not 2.13`."""
    found = _MISMATCH.match(reason)
    if found is None:
        return reason
    what = found.group(1).removesuffix(" version")
    return f"{what} {found.group(2)}, not {found.group(3)}"


def no_variant_problem(
    hub: Hub,
    spec_key: str,
    repo: str,
    commit: str,
    target: Target,
    reasons: list[str],
    refs: list[Ref] | None,
) -> MissingBuild:
    """The commit's missing build for `target`, naming the newest version that has one (the
    repo's refs are asked for when not given)."""
    if refs is None:
        try:
            refs = hub.refs(repo)
        except ResolutionError:
            refs = []
    for ref in sorted(refs, key=lambda r: -(version_of_branch(r.name) or -1)):
        if version_of_branch(ref.name) is None or ref.commit == commit:
            continue
        try:
            names = {
                f.path.split("/")[1] for f in hub.tree(repo, ref.commit) if f.path.count("/") >= 2
            }
        except ResolutionError:
            continue
        variant, _ = choose_variant(names, target)
        if variant is not None:
            return MissingBuild(
                spec_key, repo, commit, str(target), tuple(reasons), f"{repo}@{ref.name}", variant
            )
    return MissingBuild(spec_key, repo, commit, str(target), tuple(reasons))


def missing_builds_error(missing: list[MissingBuild]) -> NoVariantError:
    """One refusal for every kernel × target without a build: one line each (`--json`: each with
    every refused build and kernels' reason, as `problems`)."""
    missing = sorted(missing, key=lambda m: (m.spec, m.target))
    if len(missing) == 1:
        only = missing[0]
        error = NoVariantError(only.line(), fix=only.fix)
    else:
        lines = "\n".join(f"  {m.line()}" for m in missing)
        error = NoVariantError(
            f"{len(missing)} kernel builds are missing; nothing was written:\n{lines}",
            fix="pin the versions named above in their specs, or drop those targets",
        )
    error.missing = tuple(missing)  # type: ignore[attr-defined]
    return error


def missing_of(error: NoVariantError) -> tuple[MissingBuild, ...]:
    """The missing builds a refusal of `missing_builds_error` reports (none for another)."""
    return getattr(error, "missing", ())
