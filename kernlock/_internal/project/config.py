"""A project: its `pyproject.toml` settings and every source of kernel specs.

Sources, merged: `[tool.kernlock] kernels`, kernels' own
`[tool.kernels.dependencies]`, files under `[tool.kernlock] scan` (and
`--scan`), the layer kernels Transformers' default kernelize binds for the
project's models (`models`, and models `--scan` finds; see
`kernlock._internal.project.models`), `recorded` (the kernels a run of `kernlock lock
--record -- CMD` saw CMD load), and opt-in `use-kernels` (every Hub kernel of Transformers'
mapping).

    [tool.kernlock]
    kernels = ["kernels-community/flash-attn2", "kernels-community/activation@v1"]
    recorded = ["org/repo@v1"]         # what `kernlock lock --record -- CMD` saw CMD load
    models = ["./model", "org/model-id"]   # what Transformers' default kernelize loads for them
    targets = ["torch2.13-cxx11-cpu-x86_64-linux", "torch2.9-cxx11-cu128-x86_64-linux"]
    trust = ["my-org/my-kernel"]       # allow kernels from untrusted publishers
    scan = ["train.py", "configs/"]    # find attn_implementation values
    use-kernels = false                # or true, or a list of repos to keep
    lockfile = "kernels.lock"
    allow-mixed-variants = false       # ranks of one job may load other variants of the same
    commits require-signatures = false         # signatures and signers: see
    kernlock._internal.project.signers sigstore-trusted-root = "..."
    gpu-archs = ["8.0", "9.0"]         # the GPUs the targets run on: see
    kernlock._internal.project.gpu_archs advisories = ["advisories.toml"]   # known-bad builds: see
    kernlock._internal.project.advisory_sources ignore-advisories = [...]  # accepted for now: see
    kernlock._internal.spec.advisory_ignores [tool.kernlock.signers]
    [tool.kernlock.groups]             # training = [...]: see kernlock._internal.project.groups
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernlock._internal.fs import tomlio
from kernlock._internal.host import current_target
from kernlock._internal.lockfile.entries import LOCK_FILENAME
from kernlock._internal.project.cooldown import read_cooldowns
from kernlock._internal.project.groups import Groups, group_specs, parse_groups
from kernlock._internal.project.suggest import close_name
from kernlock._internal.spec.advisory_ignores import AdvisoryIgnore, parse_ignores
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import ConfigError, TargetError, UsageError

if TYPE_CHECKING:
    from kernlock._internal.spec.kernel_spec import KernelSpec

# `apply()` reads the project's settings on every start; spec.kernel_spec is imported
# only where specs are read.

PYPROJECT = "pyproject.toml"
_KNOWN_KEYS = {
    *("kernels", "models", "advisories", "ignore-advisories", "targets", "trust", "scan"),
    *("use-kernels", "lockfile", "overrides", "allow-mixed-variants", "require-signatures"),
    *("sigstore-trusted-root", "signers", "gpu-archs", "recorded", "exclude-newer"),
    *("exclude-newer-kernel", "groups"),
}


# compared by identity: no generated __eq__/__hash__ to build at import
@dataclass(frozen=True, eq=False)
class Project:
    """A directory with (optionally) a `pyproject.toml` and a `kernels.lock`."""

    root: Path
    kernels: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()  # specs `kernlock lock --record` saw the command load
    models: tuple[str, ...] = ()  # local directories (relative to the root) or Hub model ids
    kernel_dependencies: tuple[tuple[str, Any], ...] = ()
    targets: tuple[str, ...] = ()
    trust: tuple[str, ...] = ()
    scan: tuple[str, ...] = ()
    use_kernels: bool | tuple[str, ...] = False
    lockfile_name: str = LOCK_FILENAME
    overrides: tuple[Any, ...] = ()  # kernlock._internal.spec.overrides.OverrideRule
    gpu_archs: tuple[
        tuple[str, tuple[Any, ...]], ...
    ] = ()  # (target glob, kernlock._internal.project.gpu_archs.GpuArch...)
    allow_mixed_variants: bool = False
    require_signatures: bool = False
    sigstore_trusted_root: Path | None = None
    signers: tuple[
        tuple[str, tuple[str, ...]], ...
    ] = ()  # repo or glob -> allowed build-signer URIs
    advisories: tuple[
        str, ...
        # advisory files (relative to the root) or URLs: kernlock._internal.project.advisory_sources
    ] = ()
    ignore_advisories: tuple[AdvisoryIgnore, ...] = ()  # accepted for now
    lines: dict[str, int] = field(default_factory=dict)  # spec, repo, model, ignored id -> its line
    # `exclude-newer`, `exclude-newer-kernel` (repo -> value): kernlock._internal.project.cooldown
    exclude_newer: tuple[Any, tuple[tuple[str, Any], ...]] = (None, ())
    groups: Groups = ()  # name -> specs: kernlock._internal.project.groups

    @property
    def pyproject(self) -> Path:
        """Path of `pyproject.toml`."""
        return self.root / PYPROJECT


def unsafe_reason(path: Path) -> str | None:
    """Why a discovered file others may control is not to be used: owned by another user (not root),
    or lying in a world-writable directory without the sticky bit; None when it is safe."""
    import stat

    try:
        owner = path.stat().st_uid
    except FileNotFoundError:  # a dangling link: its own owner
        owner = path.lstat().st_uid
    me = os.geteuid()
    if owner not in (me, 0):
        return f"it is owned by uid {owner}, not by you (uid {me})"
    parent = path.resolve().parent.stat()
    if parent.st_mode & stat.S_IWOTH and not parent.st_mode & stat.S_ISVTX:
        return "its directory is writable by every user"
    return None


def _markers(directory: Path) -> list[Path]:
    """The project markers in `directory`: `pyproject.toml`, `kernels.lock`, `.git`."""
    return [
        directory / m for m in (PYPROJECT, LOCK_FILENAME, ".git") if os.path.lexists(directory / m)
    ]


def refuse_shared_new_project(root: Path) -> None:
    """Refuse (`ConfigError`) to start a project, one with no marker yet, in a directory every user
    can write.

    Its `pyproject.toml` and `kernels.lock` would become the project of every directory
    below it that has none of its own (a checkout under /tmp, say).
    """
    import stat

    if _markers(root) or not root.stat().st_mode & stat.S_IWOTH:
        return
    raise ConfigError(
        f"refusing to start a project in {root}: every user can write to it, and its "
        "pyproject.toml and kernels.lock would become the project of every directory below it",
        fix="run kernlock in a directory of your own (mkdir my-project && cd my-project)",
    )


def find_project_root(start: Path) -> Path:
    """The nearest directory at or above `start` with a `pyproject.toml`, `kernels.lock` or `.git`,
    else `start`.

    Like git, discovery never looks above the first project root it meets, and
    refuses (`ConfigError`) a root above `start` whose markers another user controls
    (`unsafe_reason`): a `pyproject.toml` planted in a shared parent such as /tmp is
    not adopted. (In `start` itself, the lock's own rules apply: see `check_lock_path`.)
    """
    start = start.resolve()
    for directory in (start, *start.parents):
        markers = _markers(directory)
        if not markers:
            continue
        # above start: the rules for discovered locks
        for marker in markers if directory != start else ():
            reason = unsafe_reason(marker)
            if reason is not None:
                raise ConfigError(
                    f"refusing {directory} as the project ({marker}): {reason}",
                    fix=f"make {start} a project of its own (add a pyproject.toml or run "
                    "`git init` there)",
                )
        return directory
    return start


def _string_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{PYPROJECT}: [tool.kernlock] {key} must be a list of strings",
            fix=f'write it as {key} = ["...", ...]',
        )
    return tuple(value)


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None


def load_project(root: Path | str = ".") -> Project:
    """Read `[tool.kernlock]` and `[tool.kernels.dependencies]` of the project at `root`."""
    root = Path(root).resolve()
    path = root / PYPROJECT
    if not path.is_file():
        return Project(root=root)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not valid UTF-8 (byte {error.start})", fix="save it as UTF-8"
        ) from None
    except OSError as error:
        raise ConfigError(
            f"{path}: cannot be read ({error.strerror})",
            fix="make it readable (check its permissions)",
        ) from None
    try:
        data = tomlio.loads(text)
    except ValueError as error:
        raise ConfigError(
            f"{path}: not valid TOML ({error})", fix="correct the TOML syntax there"
        ) from None
    tool = data.get("tool", {})
    if isinstance(tool, dict) and "kernlock" not in tool:
        _refuse_near_miss_table(path, tool)
    config = tool.get("kernlock", {})
    if not isinstance(config, dict):
        raise ConfigError(
            f"{path}: [tool.kernlock] must be a table",
            fix="write its keys under a [tool.kernlock] header",
        )
    unknown = sorted(set(config) - _KNOWN_KEYS)
    if unknown:
        match = close_name(unknown[0], _KNOWN_KEYS)
        raise ConfigError(
            f"{path}: unknown key [tool.kernlock] {unknown[0]}"
            + (f" (did you mean {match}?)" if match else ""),
            fix=f"rename {unknown[0]} to {match} in [tool.kernlock]"
            if match
            else f"correct it; known keys: {', '.join(sorted(_KNOWN_KEYS))}",
        )
    deps = tool.get("kernels", {}).get("dependencies", {})
    if not isinstance(deps, dict):
        raise ConfigError(
            f"{path}: [tool.kernels.dependencies] is not a table",
            fix='write it as a table of "org/repo" = <version>',
        )
    use_kernels = config.get("use-kernels", False)
    if isinstance(use_kernels, list):
        use_kernels = _string_list(use_kernels, "use-kernels")
    elif not isinstance(use_kernels, bool):
        raise ConfigError(
            f"{path}: [tool.kernlock] use-kernels must be true, false or a list of repos",
            fix='write use-kernels = true, or use-kernels = ["org/repo", ...]',
        )
    lockfile = config.get("lockfile", LOCK_FILENAME)
    allow_mixed = config.get("allow-mixed-variants", False)
    if not isinstance(allow_mixed, bool):
        raise ConfigError(
            f"{path}: [tool.kernlock] allow-mixed-variants must be true or false",
            fix="write allow-mixed-variants = true (or false)",
        )
    if not isinstance(lockfile, str) or not lockfile:
        raise ConfigError(
            f"{path}: [tool.kernlock] lockfile must be a file name",
            fix='write lockfile = "kernels.lock" (or another path), or remove the key',
        )
    require_signatures = config.get("require-signatures", False)
    if not isinstance(require_signatures, bool):
        raise ConfigError(
            f"{path}: [tool.kernlock] require-signatures must be true or false",
            fix="write require-signatures = true (or false)",
        )
    trusted_root = config.get("sigstore-trusted-root")
    if trusted_root is not None and (not isinstance(trusted_root, str) or not trusted_root):
        raise ConfigError(
            f"{path}: [tool.kernlock] sigstore-trusted-root must be the path of a "
            "trusted_root.json",
            fix='write sigstore-trusted-root = "path/to/trusted_root.json", or remove the key',
        )
    kernels = _string_list(config.get("kernels", []), "kernels")
    groups = parse_groups(config.get("groups"), path)
    listed = (*kernels, *(spec for _, specs in groups for spec in specs))
    lines = {spec: line for spec in listed if (line := _line_of(text, f'"{spec}"')) is not None}
    lines.update({repo: line for repo in deps if (line := _line_of(text, f'"{repo}"')) is not None})
    models = _string_list(config.get("models", []), "models")
    ignores = parse_ignores(config.get("ignore-advisories", []), str(path))
    named = (*models, *(i.id for i in ignores))  # an ignore's line, for verify to point at
    lines.update(
        {name: line for name in named if (line := _line_of(text, f'"{name}"')) is not None}
    )
    return Project(
        root=root,
        kernels=kernels,
        recorded=_string_list(config.get("recorded", []), "recorded"),
        models=models,
        kernel_dependencies=tuple(deps.items()),
        targets=_string_list(config.get("targets", []), "targets"),
        trust=_string_list(config.get("trust", []), "trust"),
        scan=_string_list(config.get("scan", []), "scan"),
        use_kernels=use_kernels,
        lockfile_name=lockfile,
        overrides=_overrides(config.get("overrides"), str(path)),
        gpu_archs=_gpu_archs(config.get("gpu-archs"), str(path)),
        allow_mixed_variants=allow_mixed,
        require_signatures=require_signatures,
        sigstore_trusted_root=root / trusted_root if trusted_root else None,
        signers=_signers(config.get("signers", {}), path),
        advisories=_string_list(config.get("advisories", []), "advisories"),
        ignore_advisories=ignores,
        lines=lines,
        exclude_newer=read_cooldowns(config, path),
        groups=groups,
    )


def _signers(table: Any, path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`[tool.kernlock.signers]`: repo (or glob) -> list of build-signer URIs."""
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}: [tool.kernlock.signers] is not a table",
            fix='write it as a table of "org/repo" = ["<workflow URI>@<ref>", ...]',
        )
    entries = []
    for pattern, uris in table.items():
        if pattern.count("/") != 1 or not all(pattern.split("/")):
            raise ConfigError(
                f"{path}: [tool.kernlock.signers] {pattern!r} is not a repo or a glob of repos",
                fix='key it "org/repo" or "org/*"',
            )
        signers = _string_list(uris, f"signers.{pattern!r}")
        bad = [uri for uri in signers if not uri.startswith("https://") or "@" not in uri]
        if bad:
            raise ConfigError(
                f"{path}: [tool.kernlock.signers] {pattern!r}: {bad[0]!r} is not a build-signer "
                "URI",
                fix="write it as https://github.com/<org>/<repo>/.github/workflows/<file>@<ref>",
            )
        entries.append((pattern, signers))
    return tuple(entries)


def _overrides(table: Any, source: str) -> tuple[Any, ...]:
    if table is None:
        return ()
    from kernlock._internal.spec.overrides import parse_overrides

    return parse_overrides(table, source)


def _gpu_archs(value: Any, source: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if value is None:
        return ()
    from kernlock._internal.project.gpu_archs import parse_gpu_archs

    return parse_gpu_archs(value, source)


def project_targets(project: Project, extra: tuple[str, ...] = ()) -> tuple[Target, ...]:
    """Targets to lock: the configured ones plus `extra`.

    A project that configures no targets covers the current environment (plus `extra`).
    """
    targets = [parse_target(t) for t in (*project.targets, *extra)]
    if not project.targets:
        try:
            targets.append(current_target())
        except TargetError:
            if not targets:
                raise
    return tuple(sorted(set(targets)))


def _refuse_near_miss_table(path: Path, tool: dict[str, Any]) -> None:
    """A `[tool.<name>]` table that misspells `[tool.kernlock]` (`[tool.kernlok]`): its settings
    would be silently ignored."""
    for name in tool:
        if name not in ("kernels",) and close_name(name, ("kernlock",), cutoff=0.75):
            raise ConfigError(
                f"{path}: [tool.{name}] is not read by kernlock (did you mean [tool.kernlock]?); "
                "nothing was changed",
                fix=f"rename the table [tool.{name}] to [tool.kernlock] in {path.name}",
            )


def project_specs(
    project: Project, scan_paths: tuple[str, ...] = (), skipped: list[str] | None = None
) -> list[KernelSpec]:
    """Every spec the project declares, each with its origin (file and line); scanned non-literal
    sites into `skipped`."""
    from kernlock._internal.project.scan import scan_paths as scan
    from kernlock._internal.project.use_kernels import use_kernels_specs
    from kernlock._internal.spec.kernel_spec import RECORDED, Origin, parse_spec, spec_from_version

    pyproject = os.path.relpath(project.pyproject)
    specs = [
        parse_spec(text, Origin(pyproject, project.lines.get(text))) for text in project.kernels
    ]
    specs.extend(group_specs(project.groups, pyproject, project.lines))
    specs.extend(parse_spec(text, Origin(RECORDED)) for text in project.recorded)
    for repo, version in project.kernel_dependencies:
        specs.append(spec_from_version(repo, version, Origin(pyproject, project.lines.get(repo))))
    paths = [*(project.root / p for p in project.scan), *(Path(p) for p in scan_paths)]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise UsageError(
            f"scan path {missing[0]} does not exist", fix="correct [tool.kernlock] scan or --scan"
        )
    specs.extend(scan(paths, skipped))
    if project.use_kernels:
        specs.extend(use_kernels_specs(project.use_kernels))
    return specs


def expand_aliases(specs: Iterable[KernelSpec], target: Target | None) -> list[KernelSpec]:
    """Replace `flash_attention_N` with the Hub kernel Transformers falls back to."""
    from kernlock._internal.compat.transformers import alias_repo

    return [
        spec.with_repo(alias_repo(spec.alias, target)) if spec.alias else spec for spec in specs
    ]


def resolving_target(targets: tuple[Target, ...]) -> Target | None:
    """The environment whose Transformers defaults decide bare specs: this one, else the first
    target (if any)."""
    try:
        return current_target()
    except TargetError:
        return targets[0] if targets else None


def collect_specs(
    project: Project,
    specs: Iterable[str] = (),
    scan: Iterable[str] = (),
    target: Target | None = None,
    skipped: list[str] | None = None,
) -> list[KernelSpec]:
    """Every spec from the command line and the project's sources, aliases expanded (see
    `project_specs`)."""
    from kernlock._internal.spec.kernel_spec import Origin, parse_spec

    extra = [parse_spec(text, Origin("command line")) for text in specs]
    found = [*extra, *project_specs(project, tuple(scan), skipped)]
    return expand_aliases(found, target or resolving_target(project_targets(project)))
