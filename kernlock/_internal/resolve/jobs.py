"""Jobs: the lock entries a resolution must produce, one per spec key and override, with the targets
each serves."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernlock._internal.lockfile.entries import Override
from kernlock._internal.spec.devices import device_type
from kernlock._internal.spec.kernel_spec import KernelSpec
from kernlock._internal.spec.overrides import OverrideRule
from kernlock._internal.spec.target import Target


@dataclass
class Job:
    """One lock entry to produce: a spec key, the spec to resolve, and the targets it serves."""

    key: str
    spec: KernelSpec
    targets: tuple[Target, ...]
    override: Override | None = None
    requested: set[str] = field(default_factory=set)
    dependency_of: set[str] = field(default_factory=set)
    devices: tuple[str, ...] = ()  # the device types it is loaded on; empty: every target
    used_by: set[str] = field(default_factory=set)
    recorded: bool = False  # every spec of the entry is one `kernlock lock --record` saw loaded

    def merge(self, other: Job) -> None:
        """Serve `other`'s targets too (one entry per identity): an unrestricted job makes the entry
        unrestricted."""
        self.targets = tuple(sorted({*self.targets, *other.targets}))
        self.devices = (
            tuple(sorted({*self.devices, *other.devices})) if self.devices and other.devices else ()
        )
        self.used_by |= other.used_by
        self.recorded = self.recorded and other.recorded

    def for_target(self, target: Target, override: Override) -> Job:
        """A job of its own for `target` alone, under `override` (a per-target pin)."""
        return Job(
            key=self.key,
            spec=self.spec,
            targets=(target,),
            override=override,
            requested=set(self.requested),
            dependency_of=set(self.dependency_of),
            devices=self.devices,
            used_by=set(self.used_by),
            recorded=self.recorded,
        )

    @property
    def identity(self) -> tuple[str, str]:
        return self.key, self.override.when if self.override else ""


def plan_jobs(
    spec: KernelSpec, targets: tuple[Target, ...], rules: tuple[OverrideRule, ...]
) -> list[Job]:
    """Split a spec's targets between its own resolution and the overrides that match them."""
    groups: dict[OverrideRule | None, list[Target]] = {}
    for target in targets:
        if spec.devices and device_type(target.backend) not in spec.devices:
            continue  # a kernel Transformers maps only to GPUs: a CPU target never loads it
        rule = next((r for r in rules if r.repo == spec.repo and r.matches(target)), None)
        groups.setdefault(rule, []).append(target)
    jobs = []
    for rule, matched in groups.items():
        if rule is None:
            jobs.append(
                Job(
                    key=spec.key,
                    spec=spec,
                    targets=tuple(matched),
                    devices=spec.devices,
                    used_by=set(spec.used_by),
                    recorded=spec.recorded,
                )
            )
        else:
            jobs.append(
                Job(
                    key=spec.key,
                    spec=rule.spec(spec),
                    targets=tuple(matched),
                    override=Override(when=rule.when, use=rule.use, reason=rule.reason),
                    devices=spec.devices,
                    used_by=set(spec.used_by),
                    recorded=spec.recorded,
                )
            )
    return jobs
