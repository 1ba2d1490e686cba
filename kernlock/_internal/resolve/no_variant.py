"""Why a locked commit has no build for a target, and the version that has one (the no-variant
refusal)."""

from __future__ import annotations

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.records import Ref
from kernlock._internal.hub.variants import choose_variant
from kernlock._internal.model.spec import version_of_branch
from kernlock._internal.model.target import Target
from kernlock.errors import ResolutionError


def no_variant_problem(
    hub: Hub,
    spec_key: str,
    repo: str,
    commit: str,
    target: Target,
    reasons: list[str],
    refs: list[Ref] | None,
) -> tuple[str, str]:
    """The problem of a commit without a build for `target`, naming a version that has one; and its
    fix."""
    hint, fix = "", "drop that target, or pin a version that has a build for it"
    for ref in sorted(refs or [], key=lambda r: -(version_of_branch(r.name) or -1)):
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
            hint = f"; {repo}@{ref.name} has {variant} for it"
            fix = f"pin {repo}@{ref.name} in its spec and run `kernlock lock`, or drop that target"
            break
    listing = "; ".join(reasons) or "the commit has no build variants"
    return (
        f"{spec_key} ({commit[:12]}) has no build variant for target {target}: {listing}{hint}",
        fix,
    )
