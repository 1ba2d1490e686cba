"""Resolution: kernel specs → commits, build variants per target, file hashes.

Variant choice (`kernlock._internal.hub.variants`) reuses kernels' own parsing and ranking,
evaluated for each target instead of the running machine, so the lock predicts
exactly what kernels will load. Hub requests run concurrently through
`kernlock._internal.hub.client`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from kernlock._internal.compat.kernels_api import warm_variant_ranking
from kernlock._internal.compat.transformers import default_version
from kernlock._internal.hub.client import Hub
from kernlock._internal.hub.responses import Ref
from kernlock._internal.hub.variants import choose_variant, group_variants
from kernlock._internal.lockfile.entries import LockedKernel, Lockfile, format_for
from kernlock._internal.lockfile.kernels_json import MIGRATED
from kernlock._internal.lockfile.target_pins import is_target_pin, pinned_target, target_pin
from kernlock._internal.resolve.commit_lock import CommitLocking
from kernlock._internal.resolve.dependencies import dep_spec, refuse_dependency_cycles
from kernlock._internal.resolve.jobs import Job, plan_jobs
from kernlock._internal.resolve.no_variant import MissingBuild, missing_builds_error, missing_of
from kernlock._internal.resolve.options import ResolveOptions, resolving_context
from kernlock._internal.resolve.repo_typos import refs_or_suggestion
from kernlock._internal.resolve.small_files import SmallFiles
from kernlock._internal.spec.ids import is_git_sha
from kernlock._internal.spec.kernel_spec import KernelSpec, looks_like_sha, version_of_branch
from kernlock._internal.spec.target import Target
from kernlock.errors import NoVariantError, ResolutionError


class Resolver(CommitLocking):
    """Resolves specs against a Hub, reusing pins from a previous lock."""

    def __init__(
        self,
        hub: Hub,
        options: ResolveOptions,
        previous: Lockfile | None = None,
        progress: Callable[[str], None] | None = None,
        workers: int = 16,
    ):
        self.hub = hub
        self.options = options
        self.previous = previous
        self.progress = progress or (lambda message: None)
        self.workers = workers
        self.warnings: list[str] = []
        self.reasons: dict[
            tuple[str, str], str
        ] = {}  # entry identity -> why its commit changed, where `lock_changes` cannot tell
        self._histories: dict[tuple[str, str], list[str]] = {}
        self._known: set[str] = set()  # every repo the project names: what a typo most likely means
        self._files = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kernlock-file")
        self._blobs = SmallFiles(hub, self._files)

    # ---------------------------------------------------------------- public

    def resolve(self, specs: list[KernelSpec]) -> Lockfile:
        """Resolve every spec (and transitive kernel dependencies) into a lock."""
        try:
            return self._resolve(specs)
        finally:
            self._files.shutdown(wait=True, cancel_futures=True)

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

    def history(self, repo: str, branch: str) -> list[str]:
        """A branch's commits, newest first (none when the Hub has no such branch); asked once per
        resolution."""
        key = (repo, branch)
        if key not in self._histories:
            try:
                self._histories[key] = self.hub.commits(repo, branch)
            except ResolutionError:
                self._histories[key] = []
        return self._histories[key]

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
            made = self._extend_previous(previous, job)
        else:
            self.progress(f"{job.key}: resolving")
            made = [(self._resolve_fresh(job), job)]
        if self.options.advisories:
            from kernlock._internal.resolve.advised import screen

            made = screen(self, made)
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

    def _extend_previous(self, previous: LockedKernel, job: Job) -> list[tuple[LockedKernel, Job]]:
        """Keep a pinned commit; add variants only for targets the old lock lacked.

        A new target the commit has no build for takes a build appended to the entry's branch since
        (`kernlock._internal.resolve.appended`): the entry moves where its locked variants are
        unchanged, else that target alone is pinned to the commit with its build.
        """
        missing = [t for t in job.targets if previous.variant_for(t) is None]
        # a migrated pin
        if missing and previous.ref is not None and not previous.resolution.startswith(MIGRATED):
            # is kept as kernels' lock wrote it (`_lock_commit` names a bad one)
            names = sorted(
                group_variants(
                    previous.repo, previous.commit, self.hub.tree(previous.repo, previous.commit)
                )
            )
            unbuilt = [t for t in missing if choose_variant(names, t)[0] is None]
            if unbuilt:
                appended = self._append(previous, job, unbuilt)
                if appended is not None:
                    return appended
        return [(self._keep_or_relock(previous, job), job)]

    def _append(
        self, previous: LockedKernel, job: Job, unbuilt: list[Target]
    ) -> list[tuple[LockedKernel, Job]] | None:
        """Lock `unbuilt` targets at builds appended to the entry's branch after its commit (None:
        there are none)."""
        from kernlock._internal.resolve.appended import find_appended

        plan = find_appended(self.hub, previous, unbuilt, self.options.cutoff(previous.repo))
        if plan is None:
            return None
        named = ", ".join(map(str, unbuilt))
        if plan.move_to is not None:
            moved = self._lock_commit(
                job,
                repo=previous.repo,
                commit=plan.move_to,
                ref=previous.ref,
                version=previous.version,
                resolution=f"{previous.resolution}; moved to {plan.move_to[:12]}: builds "
                f"appended for {named}, locked variants unchanged",
            )
            before = {v.name: v.files for v in previous.variants}
            # the promise, by sha256
            if all(before.get(v.name, v.files) == v.files for v in moved.variants):
                self.reasons[job.identity] = (
                    f"moved to {plan.move_to[:12]}: builds appended, locked variants unchanged"
                )
                return [(replace(moved, aliases=previous.aliases), job)]
            plan = replace(
                plan,
                move_to=None,
                pins=dict.fromkeys(unbuilt, plan.move_to),
                kept_at=dict.fromkeys(unbuilt, "a locked variant's files differ there"),
            )
        made: list[tuple[LockedKernel, Job]] = []
        for target, commit in sorted(plan.pins.items()):
            reason = f"build appended at {commit[:12]}"
            pin_job = job.for_target(target, target_pin(target, commit, reason))
            kernel = self._lock_commit(
                pin_job,
                repo=previous.repo,
                commit=commit,
                ref=previous.ref,
                version=previous.version,
                resolution=f"{previous.ref}: {previous.commit[:12]} has no build for {target}; "
                f"{reason} ({plan.kept_at[target]}, so the other targets keep "
                f"{previous.commit[:12]})",
            )
            made.append((replace(kernel, aliases=previous.aliases), pin_job))
        rest = replace(job, targets=tuple(t for t in job.targets if t not in plan.pins))
        if not rest.targets:
            return made
        return [(self._keep_or_relock(previous, rest), rest), *made]

    def _keep_or_relock(self, previous: LockedKernel, job: Job) -> LockedKernel:
        """The previous entry for the job's targets: kept as it is when complete, else locked again
        at its commit."""
        wanted = set(job.targets)
        have = {t for v in previous.variants for t in v.targets}
        complete = wanted <= have and (
            not self.options.all_variants
            or {v.name for v in previous.variants} >= set(previous.build_variants)
        )
        # a 1.0 lock: verify now
        verified = all(v.signature is not None or not v.signed for v in previous.variants)
        if (
            complete
            and verified
            and (previous.trust != "allowlist" or previous.repo in self.options.trust_allowlist)
        ):
            variants = tuple(
                replace(v, targets=tuple(t for t in v.targets if t in wanted))
                for v in previous.variants
                if self.options.all_variants or any(t in wanted for t in v.targets)
            )
            # the recorded signer against today's policy: no network, no sigstore
            for variant in variants:
                self.options.signing.check(previous.repo, variant.name, variant.signature)
            return replace(previous, variants=variants)
        fresh = self._lock_commit(
            job,
            repo=previous.repo,
            commit=previous.commit,
            ref=previous.ref,
            version=previous.version,
            resolution=previous.resolution,
        )
        return replace(fresh, aliases=previous.aliases)

    def _resolve_fresh(self, job: Job) -> LockedKernel:
        spec = job.spec
        refs = refs_or_suggestion(self.hub, spec, self._known)  # a typo: the repo it means
        canonical = self.hub.canonical_repo(spec.repo)
        ref, version, commit, resolution = self._pick_commit(spec, refs, job)
        if job.override is not None:
            resolution = f"override for {job.override.when}: {resolution}"
        kernel = self._lock_commit(
            job,
            repo=canonical,
            commit=commit,
            ref=ref,
            version=version,
            resolution=resolution,
            refs=refs,
        )
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
