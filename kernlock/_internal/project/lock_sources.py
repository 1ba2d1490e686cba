"""What brought each lock entry in (`kernlock tree`, `kernlock why`): the project's sources read
again, and what the lock itself records, with no Hub request.

An entry's sources are the specs of the project that name its spec key (a `[tool.kernlock] kernels`
or `[tool.kernels.dependencies]` line of `pyproject.toml`, a `[tool.kernlock.groups]` group's, a
`--scan` finding with its `file:line`, `recorded`, `use-kernels`), the models and call sites of
its `used-by` (a model with the row of the Transformers kernelize mapping the lock's `[[model]]`
records), the override or per-target pin it is locked under, and the entries whose
`kernel-depends` name it (`dependency-of`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kernlock._internal.lockfile.entries import LockedKernel, Lockfile
from kernlock._internal.lockfile.target_pins import is_target_pin
from kernlock._internal.project.config import (
    Project,
    collect_specs,
    expand_aliases,
    project_targets,
    resolving_target,
)
from kernlock._internal.project.groups import group_specs
from kernlock._internal.project.use_kernels import ORIGIN as USE_KERNELS
from kernlock._internal.spec.kernel_spec import RECORDED, KernelSpec


@dataclass(frozen=True)
class Source:
    """One reason an entry is in the lock: its `kind`, a line saying it, and `where` it is written
    (`file:line`, or None)."""

    kind: str  # pyproject, group, scan, recorded, use-kernels, model, call-site, override,
    # target-pin, kernel-depends, lock-input
    text: str
    where: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "text": self.text, "where": self.where}

    def describe(self) -> str:
        return f"{self.kind}: {self.where + ': ' if self.where else ''}{self.text}"


def _spec_source(spec: KernelSpec, project: Project) -> Source:
    origin = spec.origin
    where = str(origin) if origin is not None and origin.line is not None else None
    if origin is not None and origin.where == RECORDED:
        return Source("recorded", f"{spec.text} ([tool.kernlock] recorded)")
    if origin is not None and origin.where == USE_KERNELS:
        return Source("use-kernels", f"{spec.text} (Transformers' kernel mapping)")
    if origin is not None and origin.where.endswith(project.pyproject.name):
        return Source("pyproject", f'"{spec.text}"', where or origin.where)
    return Source("scan", spec.text, where or (origin.where if origin else None))


def _group_sources(project: Project) -> list[tuple[str, Source]]:
    """Each spec of `[tool.kernlock.groups]` as (its key, aliases expanded; its source)."""
    if not project.groups:
        return []
    pyproject = project.pyproject.name
    target = resolving_target(project_targets(project))
    return [
        (
            spec.key,
            Source("group", f'"{spec.text}" in [tool.kernlock.groups] {name}', str(spec.origin)),
        )
        for name, members in project.groups
        for spec in expand_aliases(
            group_specs(((name, members),), pyproject, project.lines), target
        )
    ]


def _used_by(kernel: LockedKernel, lock: Lockfile, project: Project) -> list[Source]:
    """The models (where the project declares them, with their mapping row) and call sites of the
    entry's `used-by`."""
    found = []
    for use in kernel.used_by:
        model = next((m for m in lock.models if use.startswith(f"{m.name}: ")), None)
        if model is None:
            site, _, call = use.rpartition(": ")
            found.append(Source("call-site", call or use, site or None))
            continue
        rows = [row for row in model.layers if f" -> {kernel.spec} " in row]
        layer = use[len(model.name) + 2 :].split(" (", 1)[0]
        row = next((r for r in rows if r.startswith(f"{layer} -> ")), None)
        line = project.lines.get(model.name) if model.name in project.models else None
        mapping = f"; Transformers {model.transformers}'s kernelize mapping: {row}" if row else ""
        found.append(
            Source(
                "model",
                f"{model.name} ({model.model_class}), layer {layer}{mapping}",
                f"{project.pyproject.name}:{line}" if line else None,
            )
        )
    return found


def _override(kernel: LockedKernel) -> list[Source]:
    override = kernel.override
    if override is None:
        return []
    if is_target_pin(override):
        return [Source("target-pin", f"{override.when}: {override.reason}")]
    return [
        Source(
            "override",
            f'[tool.kernlock.overrides."{kernel.repo}"] {override.when} -> {override.use}'
            + (f" ({override.reason})" if override.reason else ""),
        )
    ]


@dataclass(frozen=True)
class Traced:
    """A lock entry, the locked targets it serves (a variant, or native there) and its sources."""

    kernel: LockedKernel
    targets: tuple[str, ...]
    sources: tuple[Source, ...]

    def to_dict(self) -> dict[str, Any]:
        k = self.kernel
        return {
            "spec": k.spec,
            "repo": k.repo,
            "ref": k.ref,
            "commit": k.commit,
            "override": k.override.when if k.override else None,
            "targets": list(self.targets),
            "variants": {str(t): v.name for v in k.variants for t in v.targets},
            "native": list(k.native),
            "groups": list(k.groups),
            "sources": [source.to_dict() for source in self.sources],
        }


def trace(project: Project, lock: Lockfile) -> list[Traced]:
    """Every entry with its sources (none found for an input: `lock-input`, the lock may be
    stale)."""
    specs = collect_specs(replace(project, groups=()))
    grouped = _group_sources(project)
    traced = []
    for kernel in lock.kernels:
        sources = [_spec_source(s, project) for s in specs if s.key == kernel.spec]
        sources += [source for key, source in grouped if key == kernel.spec]
        sources += _used_by(kernel, lock, project) + _override(kernel)
        sources += [Source("kernel-depends", f"a dependency of {d}") for d in kernel.dependency_of]
        if not sources:
            sources.append(
                Source(
                    "lock-input",
                    f"{kernel.spec} is one of the lock's inputs, and no source of the project "
                    "names it now (`kernlock verify` says whether the lock is stale)",
                )
            )
        served = {str(t) for v in kernel.variants for t in v.targets}
        served |= {reason.split(": ", 1)[0] for reason in kernel.native}
        traced.append(Traced(kernel, tuple(sorted(served)), tuple(dict.fromkeys(sources))))
    return traced
