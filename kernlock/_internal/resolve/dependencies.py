"""Kernels' dependencies (`kernel-depends` in a variant's metadata.json) as specs, and the cycles
kernels refuses."""

from __future__ import annotations

from kernlock._internal.lockfile.entries import LockedKernel
from kernlock._internal.spec.kernel_spec import KernelSpec, version_of_branch
from kernlock.errors import ResolutionError


def refuse_dependency_cycles(kernels: tuple[LockedKernel, ...]) -> None:
    """Refuse a lock whose `kernel-depends` reach a kernel from itself: kernels fails every load of
    it (cyclic dependency)."""
    graph: dict[str, set[str]] = {}
    commits: dict[str, str] = {}
    for kernel in kernels:
        graph.setdefault(kernel.repo, set()).update(dep_spec(d).repo for d in kernel.depends)
        commits[kernel.repo] = kernel.commit
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(repo: str, path: list[str]) -> list[str] | None:
        state[repo] = 1
        for dep in sorted(graph.get(repo, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep] if dep in path else [*path, dep]
            if dep not in state and (cycle := visit(dep, [*path, dep])) is not None:
                return cycle
        state[repo] = 2
        return None

    for repo in sorted(graph):
        if repo not in state and (cycle := visit(repo, [repo])) is not None:
            named = " -> ".join(cycle)
            first = cycle[0]
            raise ResolutionError(
                f"kernel-depends form a cycle: {named} (in metadata.json at "
                f"{first}@{commits[first][:12]}), so kernels would refuse every load of it (cyclic "
                "dependency); nothing was written",
                fix=f"pin a revision without the cycle (`kernlock lock {first}@<commit>`) or "
                "ask the publisher to fix kernel-depends",
            )


def dep_spec(key: str) -> KernelSpec:
    from kernlock._internal.spec.kernel_spec import parse_spec, spec_from_version

    spec = parse_spec(key)
    number = version_of_branch(spec.revision or "")
    return spec_from_version(spec.repo, number) if number is not None else spec
