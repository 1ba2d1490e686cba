"""`[tool.kernlock] use-kernels`: the kernels Transformers' `use_kernels=True` mapping loads, as
specs."""

from __future__ import annotations

from kernlock._internal.spec.kernel_spec import KernelSpec
from kernlock.errors import ConfigError

ORIGIN = "Transformers use_kernels mapping"  # where its specs come from (`Origin.where`)


def _refuse_unmapped(selection: tuple[str, ...], mapped: set[str]) -> None:
    """A `use-kernels` entry that Transformers' `use_kernels=True` mapping does not load (a typo
    would lock nothing)."""
    from kernlock._internal.project.suggest import close_repo, known_list

    for repo in selection:
        if repo not in mapped:
            match = close_repo(repo, mapped)
            raise ConfigError(
                f"[tool.kernlock] use-kernels lists {repo}, which the installed Transformers' "
                f"use_kernels mapping does not load (it maps {known_list(mapped)}); nothing was "
                "changed" + (f"; did you mean {match}?" if match else ""),
                fix=f"write {match!r} in use-kernels"
                if match
                else f"remove {repo!r} from use-kernels",
            )


def use_kernels_specs(selection: bool | tuple[str, ...]) -> list[KernelSpec]:
    """The specs `[tool.kernlock] use-kernels` brings in: Transformers' `use_kernels=True` mapping,
    all of it (`true`) or the listed repos, each checked to be in it."""
    from kernlock._internal.compat.transformers import use_kernels_repos
    from kernlock._internal.spec.kernel_spec import Origin, parse_spec, spec_from_version

    origin = Origin(ORIGIN)
    mapped = use_kernels_repos()
    if isinstance(selection, tuple):
        _refuse_unmapped(selection, {repo for repo, _, _ in mapped})
    specs = []
    for repo, version, revision in mapped:
        if isinstance(selection, tuple) and repo not in selection:
            continue
        if revision is not None:
            specs.append(parse_spec(f"{repo}@{revision}", origin))
        else:
            specs.append(spec_from_version(repo, version if version is not None else 1, origin))
    return specs
