"""Per-target overrides: "pin this kernel to @v2 on CUDA 12.8 until the fix lands".

    [[tool.kernlock.overrides."kernels-community/flash-attn2"]]
    backend = "cu128"          # fnmatch pattern on the target's backend (cu128, cu12*, rocm*, cpu)
    torch = ">=2.9,<2.11"      # optional: version specifier on the target's torch major.minor
    cpu = "x86_64"             # optional
    os = "linux"               # optional
    revision = "v2"            # or: version = 2
    reason = "v3 fails in the GQA backward pass on CUDA 12.8"

Targets that match an override get their own lock entry at the override's pin;
the others keep the spec's own resolution. Code keeps the bare spec.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from typing import Any

from kernlock._internal.spec.kernel_spec import KernelSpec, parse_spec, spec_from_version
from kernlock._internal.spec.target import Target
from kernlock.errors import ConfigError, SpecError

_MATCH_KEYS = ("backend", "torch", "cpu", "os")


@dataclass(frozen=True)
class OverrideRule:
    """One override: which targets of which repo, the pin they get, and why."""

    repo: str
    reason: str
    backend: str | None = None
    torch: str | None = None
    cpu: str | None = None
    os: str | None = None
    version: int | None = None
    revision: str | None = None

    @property
    def when(self) -> str:
        """The match criteria as text, e.g. `backend=cu128 torch>=2.9`."""
        parts = [
            f"{key}={getattr(self, key)}" for key in ("backend", "cpu", "os") if getattr(self, key)
        ]
        if self.torch:
            parts.append(
                f"torch{self.torch}" if self.torch[0] in "<>=!~" else f"torch=={self.torch}"
            )
        return " ".join(parts)

    @property
    def use(self) -> str:
        """The pin, as written in a spec (`v2`, a branch, tag or commit)."""
        return f"v{self.version}" if self.version is not None else str(self.revision)

    def matches(self, target: Target) -> bool:
        """Whether `target` falls under this override."""
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        if self.backend and not fnmatch.fnmatchcase(target.backend, self.backend):
            return False
        if self.cpu and not fnmatch.fnmatchcase(target.cpu, self.cpu):
            return False
        if self.os and not fnmatch.fnmatchcase(target.os, self.os):
            return False
        if self.torch:
            wanted = self.torch if self.torch[0] in "<>=!~" else f"=={self.torch}"
            if Version(target.torch_version) not in SpecifierSet(wanted):
                return False
        return True

    def spec(self, base: KernelSpec) -> KernelSpec:
        """The spec to resolve for matching targets (the base spec's function and origin kept)."""
        if self.version is not None:
            pinned = spec_from_version(self.repo, self.version, base.origin)
        else:
            pinned = parse_spec(f"{self.repo}@{self.revision}", base.origin)
        return pinned


_ENTRY = (
    "each override is a table of backend, torch, cpu or os, then version or revision, and a reason"
)


def parse_overrides(table: Any, source: str) -> tuple[OverrideRule, ...]:
    """Read `[tool.kernlock.overrides]`: repo -> one table or a list of tables."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not isinstance(table, dict):
        raise ConfigError(
            f"{source}: [tool.kernlock.overrides] must be a table keyed by repo",
            fix='write one [tool.kernlock.overrides."org/repo"] table per kernel repo',
        )
    rules = []
    for repo, entries in table.items():
        located = f'{source}: [tool.kernlock.overrides."{repo}"]'
        try:
            parsed = parse_spec(repo)
        except SpecError as error:
            raise ConfigError(
                f"{located}: {error.message}", fix=error.fix or "key it by the org/repo it loads"
            ) from None
        if parsed.text != parsed.repo:
            named = (
                f'[tool.kernlock.overrides."{parsed.repo}"]'
                if parsed.repo
                else "by the org/repo it loads"
            )
            raise ConfigError(
                f"{located}: the key must be a repo (org/repo), not a spec",
                fix=f"key it {named} (the override's version or revision is its pin)",
            )
        for index, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            where = f"{located}[{index}]"
            if not isinstance(entry, dict):
                raise ConfigError(f"{where} must be a table", fix=_ENTRY)
            keys = (*_MATCH_KEYS, "version", "revision", "reason")
            unknown = sorted(set(entry) - set(keys))
            if unknown:
                import difflib

                # a misspelled key is renamed, keeping what it holds (`revison` keeps the pin)
                close = difflib.get_close_matches(unknown[0], [k for k in keys if k not in entry])
                raise ConfigError(
                    f"{where}: unknown key {unknown[0]!r}"
                    + (f" (did you mean {close[0]}?)" if close else ""),
                    fix=f'rename {unknown[0]} to {close[0]} in [tool.kernlock.overrides."{repo}"] '
                    f"(entry {index + 1}) of {os.path.basename(source)}"
                    if close
                    else f"remove it; {_ENTRY}",
                )
            if not any(entry.get(key) for key in _MATCH_KEYS):
                raise ConfigError(
                    f"{where}: the override matches no target",
                    fix="say which targets it applies to (backend, torch, cpu or os)",
                )
            if ("version" in entry) == ("revision" in entry):
                raise ConfigError(
                    f"{where}: the override pins {'both' if 'version' in entry else 'neither'} "
                    "version and revision",
                    fix="give exactly one of version or revision",
                )
            if not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
                raise ConfigError(
                    f"{where}: the override has no reason",
                    fix="give a reason (it is shown by kernlock show and explain)",
                )
            if entry.get("torch"):
                try:
                    text = entry["torch"]
                    SpecifierSet(text if text[0] in "<>=!~" else f"=={text}")
                except (InvalidSpecifier, TypeError, IndexError):
                    raise ConfigError(
                        f"{where}: torch = {entry['torch']!r} is not a version specifier",
                        fix='write a specifier such as ">=2.8" or a version such as "2.8"',
                    ) from None
            version = entry.get("version")
            if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
                raise ConfigError(
                    f"{where}: version must be an integer",
                    fix="write the kernel's major version as a number, e.g. version = 2",
                )
            rule = OverrideRule(
                repo=repo,
                reason=entry["reason"].strip(),
                version=version,
                revision=str(entry["revision"]) if "revision" in entry else None,
                **{key: str(entry[key]) for key in _MATCH_KEYS if entry.get(key)},
            )
            rule.spec(parse_spec(repo))  # validate the pin's syntax now
            rules.append(rule)
    return tuple(rules)
