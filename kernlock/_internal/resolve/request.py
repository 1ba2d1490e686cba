"""What a lock is asked for. `LockRequest`: the options of one `kernlock lock`, held once from the
command line (or `kernlock.lock()`) to the re-lock, and spelled back as the command that repeats it
(for a refusal's fix). `ResolveOptions`: what the resolver is given (targets, trust, upgrades,
overrides, signing, advisories, cut-offs); `resolving_context`: the versions of the tools that
shaped it (the lock's `[resolved-with]`)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from kernlock._internal.lockfile.exclude_newer import ExcludeNewer
from kernlock._internal.project.signers import SigningPolicy
from kernlock._internal.spec.advisories import Advisory
from kernlock._internal.spec.overrides import OverrideRule
from kernlock._internal.spec.target import Target

Mode = Literal["write", "dry-run", "check"]


@dataclass(frozen=True)
class LockRequest:
    """What to lock and how: the arguments of `kernlock lock` (and of `kernlock.lock()`).

    `mode`: `"write"` writes the lock; `"dry-run"` writes nothing (`--dry-run`); `"check"` writes
    nothing either and fails when the lock would change (`--check`);
    `record` is a command to run once first, whose kernel loads are locked too (`--record`).
    """

    project_dir: str | os.PathLike[str] = "."
    specs: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    scan: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    upgrade: bool = False
    upgrade_kernels: tuple[str, ...] = ()
    all_variants: bool = False
    trust: tuple[str, ...] = ()
    lockfile: str | os.PathLike[str] | None = None
    mode: Mode = "write"
    migrate: bool = False
    record: tuple[str, ...] = ()
    exclude_newer: str | None = None  # overrides the project's cooldown settings

    @property
    def writes(self) -> bool:
        """Whether this request writes the lock (and the pyproject edits)."""
        return self.mode == "write"

    def arguments(self, *, with_lockfile: bool = True) -> str:
        """The arguments of `kernlock lock` that repeat this request, as shell text."""
        options = [
            (option, str(value))
            for option, values in (
                ("--target", self.targets),
                ("--scan", self.scan),
                ("--model", self.models),
                ("--trust", self.trust),
                ("-P", self.upgrade_kernels),
                (
                    "--lockfile",
                    [self.lockfile] if self.lockfile is not None and with_lockfile else [],
                ),
                ("--exclude-newer", [self.exclude_newer] if self.exclude_newer is not None else []),
                ("--project", [self.project_dir] if str(self.project_dir) != "." else []),
            )
            for value in values
        ]
        flags = [
            flag
            for flag, on in (("--upgrade", self.upgrade), ("--all-variants", self.all_variants))
            if on
        ]
        record = ["--record", "--", *self.record] if self.record else []
        return shlex.join(
            [*self.specs, *flags, *(part for option in options for part in option), *record]
        )

    def retry(self) -> str:
        """The `kernlock lock` command to run again, without `--lockfile` (a refused lock path's fix
        names it)."""
        rest = self.arguments(with_lockfile=False)
        return "kernlock lock" + (" " + rest if rest else "")


@dataclass(frozen=True)
class ResolveOptions:
    """What to lock beyond the specs themselves."""

    targets: tuple[Target, ...]
    all_variants: bool = False
    trust_allowlist: frozenset[str] = frozenset()
    upgrade_all: bool = False
    upgrade: frozenset[str] = frozenset()  # repos to re-resolve
    resolving_target: Target | None = None  # whose Transformers defaults apply to bare specs
    overrides: tuple[OverrideRule, ...] = ()
    signing: SigningPolicy = SigningPolicy()
    advisories: tuple[
        Advisory, ...
    ] = ()  # known-bad builds: never locked where another build will do
    exclude_newer: ExcludeNewer | None = None  # the cut-offs: kernlock._internal.resolve.cooldown

    def upgrading(self, repo: str) -> bool:
        """Whether an existing pin of `repo` must be re-resolved."""
        return self.upgrade_all or repo in self.upgrade

    def cutoff(self, repo: str) -> datetime | None:
        """The date after which `repo`'s commits are skipped (None: no cooldown)."""
        return self.exclude_newer.cutoff(repo) if self.exclude_newer else None


def resolving_context(target: Target | None) -> dict[str, str]:
    """Versions of the tools that shaped this resolution (no timestamps, so no diff churn)."""
    import importlib.metadata

    context = {}
    for name in ("kernlock", "kernels", "transformers"):
        try:
            context[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if target is not None:
        context["torch"] = target.torch_version
    return context
