"""What a resolution is asked for (`ResolveOptions`: targets, trust, upgrades, overrides, signing,
advisories, cut-offs), and the versions of the tools that shaped it (`resolving_context`, the lock's
`[resolved-with]`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kernlock._internal.lockfile.exclude_newer import ExcludeNewer
from kernlock._internal.project.signers import SigningPolicy
from kernlock._internal.spec.advisories import Advisory
from kernlock._internal.spec.overrides import OverrideRule
from kernlock._internal.spec.target import Target


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
