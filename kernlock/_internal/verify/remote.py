"""The lock against the Hub now: `verify --remote` and `kernlock outdated`.

`kernel_statuses` compares each locked kernel with its repo's refs (moved
branches, vanished refs, newer versions, renames); `check_remote` re-checks
everything the lock claims (commits, files and hashes, aliases, publisher trust).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernlock._internal.lockfile.entries import (
    SIGNATURE_FILE,
    LockedKernel,
    LockedVariant,
    Lockfile,
)
from kernlock._internal.rules.findings import CheckResult
from kernlock._internal.rules.held_back import BranchCooldown, cooled_commit
from kernlock._internal.spec.cooldown import format_date
from kernlock._internal.spec.kernel_spec import version_of_branch
from kernlock._internal.wording import plural

if TYPE_CHECKING:
    from kernlock._internal.hub.client import Hub
    from kernlock._internal.hub.responses import Ref


@dataclass(frozen=True)
class KernelStatus:
    """How a locked kernel compares with its repo's refs on the Hub now."""

    kernel: LockedKernel
    current: str | None  # commit the locked ref points at now (None: no ref, or ref gone)
    ref_kind: str | None  # "branch", "tag" or None
    latest_version: int | None  # highest `vN` branch on the Hub
    error: str | None = None  # the Hub could not be asked
    renamed_to: str | None = None  # the Hub redirects the spec's repo to this name
    rewritten: bool = False  # the ref moved to a history without the locked commit (a force-push)
    # the newest version above the locked one with a build for every locked target
    usable_version: int | None = None
    unbuildable: tuple[
        int, ...
    ] = ()  # newer versions checked and found without a build for a locked target
    appended: tuple[
        str, ...
    ] = ()  # variants on the moved branch that the locked commit lacks and no locked target loads
    cutoff: str | None = None  # the cooldown's cut-off for the repo, where one applies
    # under the cooldown, the commit of the moved branch a re-lock takes where it is not the head
    # (the locked commit: the move is held back)
    cooled: str | None = None
    held_versions: tuple[int, ...] = ()  # newer versions with no commit from before the cut-off

    @property
    def held_back(self) -> bool:
        """The branch moved, and the cooldown keeps the locked commit."""
        return self.moved and self.cooled == self.kernel.commit

    @property
    def moved(self) -> bool:
        return self.current is not None and self.current != self.kernel.commit

    @property
    def ref_gone(self) -> bool:
        return self.error is None and self.kernel.ref is not None and self.ref_kind is None

    @property
    def newer_version(self) -> int | None:
        """The highest `vN` branch, when it is above the locked version (whether or not it builds
        for the targets)."""
        version = locked_version(self.kernel)
        if (
            version is not None
            and self.latest_version is not None
            and self.latest_version > version
        ):
            return self.latest_version
        return None


def fetch_refs(repos: Iterable[str], hub: Hub) -> dict[str, list[Ref] | str]:
    """Refs of each repo, one request per repo, concurrently; a failure becomes its message."""
    from concurrent.futures import ThreadPoolExecutor

    from kernlock._internal.hub.transport import current_deadline, overall_deadline
    from kernlock.errors import HubError

    deadline = current_deadline()  # a whole check's deadline holds in the workers too

    def one(repo: str) -> list[Ref] | str:
        try:
            with overall_deadline(deadline):
                return hub.refs(repo)
        except HubError as error:
            return str(error)

    repos = sorted(set(repos))
    if not repos:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(repos))) as pool:
        return dict(zip(repos, pool.map(one, repos), strict=False))


def _default_hub(hub: Hub | None) -> Hub:
    if hub is not None:
        return hub
    from kernlock._internal.hub.client import Hub

    return Hub()


def kernel_statuses(
    lock: Lockfile,
    hub: Hub | None = None,
    *,
    inspect: bool = False,
    cooldown: BranchCooldown | None = None,
) -> list[KernelStatus]:
    """Each locked kernel against its repo's current refs.

    `inspect` (for `kernlock outdated`) also asks the Hub whether a moved branch was
    force-pushed and which newer versions have a build for every target the entry covers; under
    `cooldown`, only from the commits a re-lock under its cut-off takes.
    """
    hub = _default_hub(hub)
    refs = fetch_refs((spec_repo(k) for k in lock.kernels), hub)
    statuses = []
    for kernel in lock.kernels:
        found = refs[spec_repo(kernel)]
        if isinstance(found, str):
            statuses.append(KernelStatus(kernel, None, None, None, error=found))
            continue
        versions = {
            v: r.commit
            for r in found
            if r.kind == "branch" and (v := version_of_branch(r.name)) is not None
        }
        match = next((r for r in found if r.name == kernel.ref), None) if kernel.ref else None
        canonical = hub.canonical_repo(spec_repo(kernel))
        status = KernelStatus(
            kernel,
            current=match.commit if match else None,
            ref_kind=match.kind if match else None,
            latest_version=max(versions) if versions else None,
            renamed_to=canonical if canonical != spec_repo(kernel) else None,
        )
        statuses.append(_inspected(status, versions, hub, cooldown) if inspect else status)
    return statuses


def _inspected(
    status: KernelStatus, versions: dict[int, str], hub: Hub, cooldown: BranchCooldown | None
) -> KernelStatus:
    """`status` with `rewritten`, `usable_version` and `unbuildable` asked of the Hub (and what the
    cooldown holds back)."""
    from dataclasses import replace

    from kernlock._internal.hub.variants import group_variants
    from kernlock._internal.rules.coverage import builds

    kernel = status.kernel
    rewritten = (
        status.moved
        and status.ref_kind == "branch"
        and kernel.ref is not None
        and kernel.commit not in hub.commits(kernel.repo, kernel.ref)
    )
    targets = {target for variant in kernel.variants for target in variant.targets}
    cut = cooldown.cutoffs.cutoff(kernel.repo) if cooldown is not None else None
    cooled = None
    if cut is not None and cooldown is not None and status.moved and not rewritten:
        taken = cooldown.take(kernel, str(kernel.ref), cut)
        cooled = cooled_commit(kernel, status.current, hub, taken)
    usable, unbuildable, held = None, [], []
    locked = locked_version(kernel)
    newer = (
        sorted((v for v in versions if v > locked), reverse=True)
        if status.newer_version and locked is not None
        else []
    )
    for version in newer:
        commit = versions[version]
        if cut is not None and cooldown is not None:
            taken = cooldown.take(kernel, f"v{version}", cut)
            if taken is None:
                held.append(version)
                continue
            commit = taken
        names = group_variants(kernel.repo, commit, hub.tree(kernel.repo, commit))
        if all(builds(names, target) for target in targets):
            usable = version
            break
        unbuildable.append(version)
    appended: tuple[str, ...] = ()
    if (
        status.moved
        and not rewritten
        and status.ref_kind == "branch"
        and status.current is not None
    ):
        from kernlock._internal.hub.variants import choose_variant

        at_tip = sorted(
            group_variants(kernel.repo, status.current, hub.tree(kernel.repo, status.current))
        )
        loaded = {choose_variant(at_tip, target)[0] for target in targets}
        appended = tuple(n for n in at_tip if n not in kernel.build_variants and n not in loaded)
    return replace(
        status,
        rewritten=rewritten,
        usable_version=usable,
        unbuildable=tuple(sorted(unbuildable)),
        appended=appended,
        cutoff=format_date(cut) if cut is not None else None,
        cooled=cooled,
        held_versions=tuple(sorted(held)),
    )


def locked_version(kernel: LockedKernel) -> int | None:
    """The version an entry is locked at: its `version`, else the one its `vN` branch stands for."""
    return kernel.version if kernel.version is not None else version_of_branch(kernel.ref or "")


def spec_repo(kernel: LockedKernel) -> str:
    """The repo id as the spec names it (before any rename)."""
    return kernel.spec.split("@", 1)[0]


def check_remote(
    lock: Lockfile, result: CheckResult, hub: Hub | None = None, trusted_root: Path | None = None
) -> None:
    """Re-check what the lock claims against the Hub; moved branches are notes.

    Each locked commit must still exist and hold exactly the locked files of every
    locked variant with the locked sizes and sha256 (binaries by their LFS hash,
    small files fetched and hashed); each alias must be a rename the Hub still
    redirects to the locked repo; a "trusted-publisher" entry's publisher must be
    marked trusted on the Hub; each signed variant's bundle, as fetched, must verify against
    the Sigstore root (`trusted_root`, else the default of `kernlock._internal.rules.signatures`)
    and name the locked signer.
    """
    import time

    from kernlock._internal.hub.transport import hub_deadline, overall_deadline

    hub = _default_hub(hub)
    limit = hub_deadline()
    # the whole check, however many files: one request's deadline
    deadline = time.monotonic() + limit
    with overall_deadline(deadline):
        statuses = kernel_statuses(lock, hub)
        _check_statuses(statuses, result, hub, trusted_root, deadline, limit, lock.version)
    result.summary = plural(len({s.kernel.repo for s in statuses}), "repo")


class _OutOfTime(Exception):
    """The whole remote check's deadline passed (with the problems found in the entry being
    checked)."""

    def __init__(self, problems: list[str] | None = None) -> None:
        super().__init__()
        self.problems = problems or []


def _check_statuses(
    statuses: list[KernelStatus],
    result: CheckResult,
    hub: Hub,
    trusted_root: Path | None,
    deadline: float,
    limit: float,
    lock_version: str,
) -> None:
    import time

    from kernlock._internal.settings import DEADLINE_ENV

    for done, status in enumerate(statuses):
        kernel = status.kernel
        fix = f"kernlock lock -P {kernel.repo}"
        if status.error is not None:
            result.problem(
                status.error, "check the network, HF_ENDPOINT and HF_TOKEN", kernel=kernel.spec
            )
            continue
        try:
            if time.monotonic() >= deadline:
                raise _OutOfTime
            problems = remote_problems(kernel, hub, trusted_root, deadline, lock_version)
        except _OutOfTime as stopped:
            for problem in stopped.problems:
                result.problem(f"{kernel.spec}: {problem}", fix, kernel=kernel.spec)
            result.problem(
                f"the remote check did not finish within {limit:g} s (${DEADLINE_ENV}); "
                f"{len(statuses) - done} of {len(statuses)} entries were not checked, from "
                f"{kernel.spec} on",
                f"check the network and HF_ENDPOINT, or raise ${DEADLINE_ENV}",
                kernel=kernel.spec,
            )
            return
        except CommitGone:
            gone = True
            repin = (
                f"name a revision the Hub has in the spec of {kernel.spec}, then run kernlock lock"
            )
            result.problem(
                f"{kernel.spec}: locked commit {kernel.commit[:12]} is gone from the Hub (it "
                "answers 404 for it)",
                fix if status.current is not None else repin,
                kernel=kernel.spec,
            )
        else:
            gone = False
            for problem in problems:
                result.problem(f"{kernel.spec}: {problem}", fix, kernel=kernel.spec)
        if status.renamed_to is not None:
            result.notes.append(
                f"{kernel.spec}: {spec_repo(kernel)} was renamed to {status.renamed_to} on the "
                "Hub; update the spec (loads keep working under both names)"
            )
        if status.moved and status.current is not None:
            result.notes.append(
                f"{kernel.spec}: {status.ref_kind} {kernel.ref} moved from {kernel.commit[:12]} to "
                f"{status.current[:12]}; `{fix}` to take it"
            )
        elif status.ref_gone and not gone:
            result.notes.append(
                f"{kernel.spec}: ref {kernel.ref} no longer exists on the Hub (the locked commit "
                "does)"
            )


class CommitGone(Exception):
    """The Hub answers 404 for a locked commit."""


def remote_problems(
    kernel: LockedKernel,
    hub: Hub,
    trusted_root: Path | None = None,
    deadline: float | None = None,
    lock_version: str = "1.3",
) -> list[str]:
    """How a lock entry disagrees with the Hub: files and hashes, GPU archs, signers, aliases,
    trust; `CommitGone` if the commit is; `_OutOfTime` once `deadline` (the whole check's) has
    passed."""
    import hashlib
    import time

    from huggingface_hub.errors import RevisionNotFoundError

    from kernlock.errors import HubError

    try:
        tree = hub.tree(kernel.repo, kernel.commit)
    except HubError as error:
        if isinstance(error.__cause__, RevisionNotFoundError):
            raise CommitGone(kernel.commit) from None
        return [f"the Hub cannot list locked commit {kernel.commit[:12]} ({error})"]
    problems = []
    for variant in kernel.variants:
        prefix = f"build/{variant.name}/"
        listed = {f.path[len(prefix) :]: f for f in tree if f.path.startswith(prefix)}
        if set(listed) != {f.path for f in variant.files}:
            differ = sorted(set(listed) ^ {f.path for f in variant.files})
            problems.append(
                f"{variant.name} at {kernel.commit[:12]} does not hold the locked files (differs "
                f"in {', '.join(differ[:3])}{'…' if len(differ) > 3 else ''})"
            )
            continue
        fetched, differing = {}, set()
        for locked in variant.files:
            entry = listed[locked.path]
            if deadline is not None and time.monotonic() >= deadline:
                raise _OutOfTime(problems)  # what was found so far is still said
            try:
                if entry.lfs_sha256:
                    sha256 = entry.lfs_sha256
                else:
                    fetched[locked.path] = hub.fetch(
                        kernel.repo, kernel.commit, entry.path, entry.blob_id, entry.size
                    )
                    sha256 = hashlib.sha256(fetched[locked.path]).hexdigest()
            except HubError as error:
                problems.append(f"cannot fetch {entry.path} to check its hash ({error})")
                continue
            if (sha256, entry.size) != (locked.sha256, locked.size):
                problems.append(
                    f"{variant.name}/{locked.path}: the Hub has sha256 {sha256} ({entry.size} "
                    f"bytes), the lock says {locked.sha256} ({locked.size} bytes)"
                )
                differing.add(locked.path)
        problems += _metadata_problems(
            kernel, variant, fetched, differing, trusted_root, lock_version
        )
    for alias in kernel.aliases:
        canonical = hub.canonical_repo(alias)
        if canonical != kernel.repo:
            problems.append(
                f"alias {alias} is not a rename of {kernel.repo} on the Hub (it is {canonical})"
            )
    if kernel.trust == "trusted-publisher" and not hub.publisher_trusted(
        kernel.repo.split("/", 1)[0]
    ):
        problems.append(
            "the lock says its publisher is trusted, but the Hub does not mark "
            f"{kernel.repo.split('/', 1)[0]!r} as a trusted kernel publisher"
        )
    return problems


def _metadata_problems(
    kernel: LockedKernel,
    variant: LockedVariant,
    fetched: dict[str, bytes],
    differing: set[str],
    trusted_root: Path | None,
    lock_version: str,
) -> list[str]:
    """The fetched metadata.json (when it is the locked file) against the locked `archs`, and a
    signed variant's bundle re-verified."""
    from kernlock._internal.store.metadata import archs_problem

    problems = []
    if "metadata.json" in set(fetched) - differing and (
        archs := archs_problem(
            variant, fetched["metadata.json"], lock_version, f"at {kernel.commit[:12]}"
        )
    ):
        problems.append(archs)
    if variant.signed and "metadata.json" in fetched and SIGNATURE_FILE in fetched:
        from kernlock._internal.rules.signatures import recheck, trusted_root_path

        problem = recheck(
            kernel.repo,
            variant,
            fetched["metadata.json"],
            fetched[SIGNATURE_FILE],
            trusted_root_path(trusted_root),
        )
        if problem is not None:
            problems.append(problem[0].removeprefix(f"{kernel.repo} "))
    return problems
