"""A spec naming a repo the Hub does not have: the did-you-mean, from the project's other specs and
its previous lock, else from the kernel repos the Hub lists for the org; a scanned spec names its
`file:line`."""

from __future__ import annotations

from collections.abc import Iterable

from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import Ref
from kernlock._internal.project.suggest import close_repo
from kernlock._internal.spec.kernel_spec import KernelSpec
from kernlock.errors import HubError


def is_not_found(error: HubError) -> bool:
    """Whether the Hub answered that the repo does not exist (not: a model repo of that name)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    return isinstance(error.__cause__, RepositoryNotFoundError) and "not found" in error.message


def repo_not_found(hub: Hub, spec: KernelSpec, error: HubError, known: Iterable[str]) -> HubError:
    """`error` (repository not found) naming where the spec came from and the repo it most likely
    means: one the project names, else one the Hub lists for the org."""
    origin = spec.origin
    where = f" (from {origin})" if origin is not None else ""
    match = close_repo(spec.repo, known)
    if match is None and "/" in spec.repo:
        match = close_repo(spec.repo, hub.org_kernels(spec.repo.split("/", 1)[0]))
    if match is None:
        return HubError(f"{error.message}{where}", fix=error.fix or "check the spelling")
    fixed = spec.text.replace(spec.repo, match, 1)
    in_file = origin is not None and origin.line is not None
    return HubError(
        f"{error.message}{where}; did you mean {match}?",
        fix=f"write {fixed} instead of {spec.text} at {origin}"
        if in_file
        else f"`kernlock lock {fixed}`",
    )


def refs_or_suggestion(hub: Hub, spec: KernelSpec, known: Iterable[str]) -> list[Ref]:
    """`hub.refs` of the spec's repo; where the Hub has no such repo, `repo_not_found`'s error."""
    try:
        return hub.refs(spec.repo)
    except HubError as error:
        if not is_not_found(error):
            raise
        raise repo_not_found(hub, spec, error, known) from None
