"""Resolution: kernel specs → commits, build variants per target, file hashes.

Variant choice (`kernlock._internal.hub.variants`) reuses kernels' own parsing and ranking,
evaluated for each target instead of the running machine, so the lock predicts
exactly what kernels will load. Hub requests run concurrently through
`kernlock._internal.hub.client`. A spec naming a repo the Hub does not have gets a did-you-mean
(`refs_or_suggestion`); kernels' dependencies (`kernel-depends`) become specs (`dep_spec`), and a
cycle among them, which kernels refuses, is refused (`refuse_dependency_cycles`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from kernlock._internal.compat.kernels_api import warm_variant_ranking
from kernlock._internal.compat.transformers import default_version
from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import Ref
from kernlock._internal.lockfile.entries import LockedKernel, Lockfile, format_for
from kernlock._internal.lockfile.target_pins import is_target_pin, pinned_target
from kernlock._internal.project.suggest import close_repo
from kernlock._internal.resolve.advised import AdvisoryScreen
from kernlock._internal.resolve.appended import AppendedBuilds
from kernlock._internal.resolve.commit_lock import CommitLocker, Pin
from kernlock._internal.resolve.jobs import Job, plan_jobs
from kernlock._internal.resolve.no_variant import MissingBuild, missing_builds_error, missing_of
from kernlock._internal.resolve.request import ResolveOptions, resolving_context
from kernlock._internal.spec.ids import is_git_sha
from kernlock._internal.spec.kernel_spec import KernelSpec, looks_like_sha, version_of_branch
from kernlock.errors import HubError, NoVariantError, ResolutionError


class Resolver:
    """Resolves specs against a Hub, reusing pins from a previous lock, with the parts it is given:
    a `CommitLocker` (a commit to an entry), an `AdvisoryScreen` and `AppendedBuilds`."""

    def __init__(
        self,
        hub: Hub,
        options: ResolveOptions,
        *,
        locker: CommitLocker,
        screen: AdvisoryScreen,
        appended: AppendedBuilds,
        previous: Lockfile | None = None,
        progress: Callable[[str], None] | None = None,
        workers: int = 16,
    ):
        self.hub = hub
        self.options = options
        self.locker = locker
        self.screen = screen
        self.appended = appended
        self.previous = previous
        self.progress = progress or (lambda message: None)
        self.workers = workers
        self.warnings = locker.warnings  # the list every part adds to
        self._known: set[str] = set()  # every repo the project names: what a typo most likely means

    @property
    def reasons(self) -> dict[tuple[str, str], str]:
        """Entry identity -> why its commit changed, where `lock_changes` cannot tell."""
        return {**self.appended.reasons, **self.screen.reasons}

    # ---------------------------------------------------------------- public

    def resolve(self, specs: list[KernelSpec]) -> Lockfile:
        """Resolve every spec (and transitive kernel dependencies) into a lock."""
        try:
            return self._resolve(specs)
        finally:
            self.locker.close()

    def _resolve(self, specs: list[KernelSpec]) -> Lockfile:
        # kernels (its variant ranking) imports while the first Hub requests are under way, not
        # after them
        threading.Thread(target=warm_variant_ranking, name="kernlock-import", daemon=True).start()
        jobs: dict[tuple[str, str], Job] = {}
        before = self.previous.kernels if self.previous else ()
        self._known = {spec.repo for spec in specs} | {n for k in before for n in k.names()}
        for spec in specs:
            for job in plan_jobs(spec, self.options.targets, self.options.overrides):
                merged = jobs.setdefault(job.identity, job)
                if merged is not job:
                    merged.merge(job)
                merged.requested.add(spec.alias or spec.key)
        self._carry_target_pins(jobs)
        # found specs follow their model
        inputs = tuple(sorted({spec.key for spec in specs if not spec.used_by}))
        resolved: dict[tuple[str, str], LockedKernel] = {}
        pending = list(jobs.values())
        missing: list[MissingBuild] = []  # every kernel × target without a build, refused at once
        with ThreadPoolExecutor(
            max_workers=self.workers, thread_name_prefix="kernlock-kernel"
        ) as pool:
            while pending:
                results = list(pool.map(lambda job: self._try_one(job, missing), pending))
                for entries, _ in results:
                    for entry in entries:
                        resolved[entry.identity] = entry
                follow: dict[tuple[str, str], Job] = {}
                for (entries, deps), job in zip(results, pending, strict=False):
                    if not entries:
                        continue
                    kernel = entries[0]
                    for dep in deps:
                        done = [k for identity, k in resolved.items() if identity[0] == dep.key]
                        if done:
                            for existing in done:
                                resolved[existing.identity] = replace(
                                    existing,
                                    dependency_of=tuple(
                                        sorted({*existing.dependency_of, kernel.spec})
                                    ),
                                )
                            continue
                        for dep_job in plan_jobs(dep, job.targets, self.options.overrides):
                            dep_job.devices = job.devices  # needed wherever its dependant is
                            merged = follow.setdefault(dep_job.identity, dep_job)
                            if merged is not dep_job:
                                merged.merge(dep_job)
                            merged.requested.add(dep.key)
                            merged.dependency_of.add(kernel.spec)
                pending = list(follow.values())
        if missing:
            raise missing_builds_error(missing)
        kernels = tuple(resolved[identity] for identity in sorted(resolved))
        refuse_dependency_cycles(kernels)
        return Lockfile(
            version=format_for(kernels, (), self.options.exclude_newer),
            targets=tuple(sorted(set(self.options.targets), key=str)),
            inputs=inputs,
            kernels=kernels,
            resolved_with=resolving_context(self.options.resolving_target),
            exclude_newer=self.options.exclude_newer,
        )

    def _carry_target_pins(self, jobs: dict[tuple[str, str], Job]) -> None:
        """Keep the previous lock's per-target pins (`kernlock._internal.lockfile.target_pins`) of
        specs not being upgraded: their targets become jobs of their own, which `_previous`
        matches."""
        if self.previous is None:
            return
        for job in list(jobs.values()):
            if job.override is not None or self.options.upgrading(job.spec.repo):
                continue
            for entry in self.previous.entries(job.key):
                if not is_target_pin(entry.override) or self.options.upgrading(entry.repo):
                    continue
                assert entry.override is not None
                target = next(
                    (t for t in job.targets if str(t) == pinned_target(entry.override)), None
                )
                if target is None:
                    continue
                job.targets = tuple(t for t in job.targets if t != target)
                pin = job.for_target(target, entry.override)
                jobs[pin.identity] = pin
            if not job.targets:
                del jobs[job.identity]

    # ---------------------------------------------------------------- one entry

    def _previous(self, job: Job) -> LockedKernel | None:
        """The old lock's entry for this job, if it still pins the same thing."""
        if self.previous is None or self.options.upgrading(job.spec.repo):
            return None
        for entry in self.previous.entries(job.key):
            if entry.identity == job.identity and (
                entry.override is None or entry.override == job.override
            ):
                if self.options.upgrading(entry.repo):
                    return None
                return entry
        return None

    def _try_one(
        self, job: Job, missing: list[MissingBuild]
    ) -> tuple[list[LockedKernel], list[KernelSpec]]:
        """`_resolve_one`, its missing builds added to `missing` (then nothing made)."""
        try:
            return self._resolve_one(job)
        except NoVariantError as error:
            if not missing_of(error):
                raise
            missing.extend(missing_of(error))  # list.extend is atomic under the GIL
            return [], []

    def _resolve_one(self, job: Job) -> tuple[list[LockedKernel], list[KernelSpec]]:
        """The job's entry (first) and any per-target pins it needed, and the kernel dependencies to
        resolve next."""
        previous = self._previous(job)
        if previous is not None:
            self.progress(f"{job.key}: keeping {previous.commit[:12]}")
            made = self.appended.extend(previous, job)
        else:
            self.progress(f"{job.key}: resolving")
            made = [(self._resolve_fresh(job), job)]
        made = self.screen.screen(made)
        kernels = [
            replace(
                kernel,
                override=owner.override,
                requested=tuple(sorted(owner.requested)),
                dependency_of=tuple(sorted(owner.dependency_of)),
                devices=owner.devices,
                used_by=tuple(sorted(owner.used_by)),
                source="recorded" if owner.recorded else None,
            )
            for kernel, owner in made
        ]
        deps = list({d: dep_spec(d) for kernel in kernels for d in kernel.depends}.values())
        return kernels, deps

    def _resolve_fresh(self, job: Job) -> LockedKernel:
        spec = job.spec
        refs = refs_or_suggestion(self.hub, spec, self._known)  # a typo: the repo it means
        canonical = self.hub.canonical_repo(spec.repo)
        ref, version, commit, resolution = self._pick_commit(spec, refs, job)
        if job.override is not None:
            resolution = f"override for {job.override.when}: {resolution}"
        kernel = self.locker.lock(job, Pin(canonical, commit, ref, version, resolution), refs)
        if canonical != spec.repo:
            self.warnings.append(
                f"{spec.repo} was renamed to {canonical} on the Hub; locked under both names "
                "(update the spec)"
            )
            kernel = replace(kernel, aliases=(spec.repo,))
        return kernel

    def _pick_commit(
        self, spec: KernelSpec, refs: list[Ref], job: Job
    ) -> tuple[str | None, int | None, str, str]:
        branches = {r.name: r for r in refs if r.kind == "branch"}
        tags = {r.name: r for r in refs if r.kind == "tag"}
        if spec.floating or spec.version is not None:
            if spec.version is not None:
                version, why = spec.version, f"version {spec.version}"
            else:
                target = self.options.resolving_target or job.targets[0]
                version, why = default_version(spec.repo, target)
                others = sorted(
                    str(t) for t in job.targets if default_version(spec.repo, t)[0] != version
                )
                if others:
                    self.warnings.append(
                        f"{spec.key}: this Transformers release would default to another version "
                        f"on {', '.join(others)}; the lock pins v{version} for every target (pin "
                        f"{spec.repo}@v<N>, or add an override)"
                    )
            branch = branches.get(f"v{version}")
            if branch is None:
                available = sorted(
                    v for v in (version_of_branch(b) for b in branches) if v is not None
                )
                raise ResolutionError(
                    f"{spec.key}: version "
                    f"{version}{'' if why == f'version {version}' else f' ({why})'} has no branch "
                    f"v{version} on the Hub; available versions: "
                    f"{', '.join(map(str, available)) or 'none'}",
                    fix=f"pin one with {spec.repo}@v<N>",
                )
            commit, note = self._cooled(spec, branch, job)
            return branch.name, version, commit, f"{why} → branch {branch.name}{note}"
        revision = spec.revision or ""
        if revision in branches:
            commit, note = self._cooled(spec, branches[revision], job)
            return revision, version_of_branch(revision), commit, f"branch {revision}{note}"
        if revision in tags:
            return revision, None, tags[revision].commit, f"tag {revision}"
        if is_git_sha(revision):
            return None, None, revision, "commit"
        if looks_like_sha(revision):
            return None, None, self._expand_short_sha(spec, revision, refs), f"commit {revision}"
        raise ResolutionError(
            f"{spec.key}: no branch or tag {revision!r} on the Hub; branches: "
            f"{', '.join(sorted(branches)) or 'none'}"
            + (f"; tags: {', '.join(sorted(tags))}" if tags else ""),
            fix=f"pin one of them ({spec.repo}@<branch or tag>), or a commit ({spec.repo}@<sha>)",
        )

    def _cooled(self, spec: KernelSpec, branch: Ref, job: Job) -> tuple[str, str]:
        """The branch's head, or under a cooldown the newest commit before the cut-off with the
        job's builds (`kernlock._internal.resolve.cooldown`), and a note saying so."""
        cutoff = self.options.cutoff(spec.repo)
        if cutoff is None:
            return branch.commit, ""
        from kernlock._internal.resolve.cooldown import before_cutoff

        return before_cutoff(
            self.hub, spec.key, spec.repo, branch.name, cutoff, job.targets, bool(job.devices)
        )

    def _expand_short_sha(self, spec: KernelSpec, prefix: str, refs: list[Ref]) -> str:
        candidates: set[str] = set()
        for ref in refs:
            if ref.kind == "branch":
                candidates.update(
                    c for c in self.hub.commits(spec.repo, ref.name) if c.startswith(prefix)
                )
            elif ref.commit.startswith(prefix):
                candidates.add(ref.commit)
        if not candidates:
            raise ResolutionError(
                f"{spec.key}: no commit starting with {prefix!r} on any branch or tag",
                fix=f"check the SHA, or pin the full commit ({spec.repo}@<40-character sha>)",
            )
        if len(candidates) > 1:
            raise ResolutionError(
                f"{spec.key}: short SHA {prefix!r} is ambiguous "
                f"({', '.join(sorted(c[:12] for c in candidates))})",
                fix=f"give more characters of the commit ({spec.repo}@<longer sha>)",
            )
        return candidates.pop()


def resolver_for(
    hub: Hub,
    options: ResolveOptions,
    previous: Lockfile | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 16,
) -> Resolver:
    """A `Resolver` with its parts made for `options`, sharing one list of warnings."""
    warnings: list[str] = []  # in the order the parts say them
    locker = CommitLocker(hub, options, previous, warnings, workers)
    return Resolver(
        hub,
        options,
        locker=locker,
        screen=AdvisoryScreen(hub, options.advisories, locker, warnings, options.all_variants),
        appended=AppendedBuilds(hub, locker, options.cutoff),
        previous=previous,
        progress=progress,
        workers=workers,
    )


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
