"""Which signers a project accepts, and the check of a verified signature's identity against them.

    [tool.kernlock]
    require-signatures = false     # true: refuse unsigned variants and signers no entry allows
    sigstore-trusted-root = "..."  # another trusted_root.json (also
    $KERNLOCK_SIGSTORE_TRUSTED_ROOT)

    [tool.kernlock.signers]        # Hub repo, or fnmatch glob, -> allowed build-signer URIs
    (workflow@ref) "my-org/*" =
    ["https://github.com/my-org/kernels/.github/workflows/build.yaml@refs/heads/main"]

The entry for a repo is the most specific that matches (the exact repo, else the longest glob);
repos no entry matches get kernels' own default policy when they are `kernels-community/*` (its
curated signers, read from kernels through the adapter), else no identity check. A GitHub workflow
URI also fixes the issuer (GitHub Actions) and the source repository (the workflow's own: a fork, or
another repository calling the workflow, is refused), as kernels' `GitHubWorkflowPolicy` does. An
empty list verifies the signature and checks no identity. Where the policy names a repo's signers,
an unsigned build is refused when a signature is expected of it (another build of its commit is
signed, or the lock being replaced records a signed build of the repo); an empty list expects none.
Pure data: nothing here imports sigstore.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kernlock._internal.lockfile.entries import SIGNATURE_FILE, Signature
from kernlock.errors import SignatureError

if TYPE_CHECKING:
    from kernlock._internal.project.config import Project

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
# the Hub repos kernels' default policy is for (its curated publisher)
DEFAULT_REPOS = "kernels-community/*"


class Allowed(NamedTuple):
    """The signers allowed for a repo, and the rule they come from (for messages)."""

    signers: tuple[str, ...]
    rule: str


def workflow_repository(signer: str) -> str | None:
    """`https://github.com/<org>/<repo>` of a GitHub workflow URI, None for any other URI."""
    parts = signer.split("/")
    if signer.startswith("https://github.com/") and len(parts) > 6 and parts[5] == ".github":
        return "/".join(parts[:5])
    return None


@dataclass(frozen=True)
class SigningPolicy:
    """A project's signature settings (`[tool.kernlock]` require-signatures, sigstore-trusted-root,
    signers)."""

    require: bool = False
    signers: tuple[tuple[str, tuple[str, ...]], ...] = ()  # pattern -> URIs, as written
    trusted_root: Path | None = None

    def allowed(self, repo: str) -> Allowed | None:
        """The entry that applies to `repo`: its most specific match, else kernels' default for its
        repos, else None."""
        matches = [
            (pattern, uris) for pattern, uris in self.signers if fnmatch.fnmatchcase(repo, pattern)
        ]
        if matches:
            pattern, uris = max(matches, key=lambda m: (m[0] == repo, len(m[0])))
            return Allowed(uris, f"[tool.kernlock.signers] {json.dumps(pattern)}")
        if fnmatch.fnmatchcase(repo, DEFAULT_REPOS):
            from kernlock._internal.compat.kernels_api import default_signers

            uris = tuple(uri for _, signers in default_signers() for uri in signers)
            return Allowed(uris, f"kernels' default policy for {DEFAULT_REPOS}")
        return None

    def check(
        self, repo: str, variant: str, signature: Signature | None, *, expected: str | None = None
    ) -> None:
        """Raise `SignatureError` when `signature` (None: unsigned) is not acceptable for `repo`'s
        `variant`.

        `expected` says why a signature is expected of this build (the commit's other builds are
        signed, or the lock being replaced records signed builds of the repo): an unsigned build is
        then refused wherever the policy names the repo's signers, whatever require-signatures says
        (a signature downgrade)."""
        where = f"{repo} {variant}"
        if signature is None:
            if self.require:
                raise SignatureError(
                    f"{where}: unsigned (no {SIGNATURE_FILE}), and [tool.kernlock] "
                    "require-signatures = true",
                    fix="lock a signed revision, or set require-signatures = false in "
                    "pyproject.toml",
                )
            allowed = self.allowed(repo) if expected else None
            if allowed is not None and allowed.signers:
                raise SignatureError(
                    f"{where}: unsigned (no {SIGNATURE_FILE}), but {expected}, and {allowed.rule} "
                    "names its signers: an unsigned build where signed ones are expected may be "
                    "an upload no allowed workflow made; nothing was written",
                    fix="lock a revision an allowed signer signed (`kernlock lock "
                    f"{repo}@<revision>`); if you accept unsigned builds of {repo}, add "
                    f"{json.dumps(repo)} = [] under [tool.kernlock.signers] in pyproject.toml and "
                    "re-run `kernlock lock`",
                )
            return
        allowed = self.allowed(repo)
        found = signature.build_signer
        if allowed is None:
            if self.require:
                raise SignatureError(
                    f"{where}: signed by {found}, but no [tool.kernlock.signers] entry matches "
                    f"{repo} and require-signatures = true",
                    fix=f"if you trust that signer, add {_entry(repo, (found,))} under "
                    "[tool.kernlock.signers] in pyproject.toml and re-run `kernlock lock`",
                )
            return
        if not allowed.signers:
            return
        if found not in allowed.signers:
            raise SignatureError(
                f"{where}: signed by {found}, expected {' or '.join(allowed.signers)} "
                f"({allowed.rule})",
                fix="if you trust that signer, add "
                f"{_entry(repo, (*allowed.signers, found))} under [tool.kernlock.signers] in "
                "pyproject.toml and re-run `kernlock lock`; otherwise lock a revision an allowed "
                "signer signed",
            )
        repository = workflow_repository(found)
        if repository is None:
            return
        if signature.issuer != GITHUB_ISSUER:
            raise SignatureError(
                f"{where}: signed by {found} through OIDC issuer {signature.issuer}, expected "
                f"{GITHUB_ISSUER} ({allowed.rule}); a GitHub workflow can only sign through GitHub "
                "Actions",
                fix="lock a revision an allowed signer signed",
            )
        if signature.source_repository != repository:
            raise SignatureError(
                f"{where}: signed by {found} running in {signature.source_repository}, expected it "
                f"to run in {repository} ({allowed.rule}); a fork, or another repository calling "
                "the workflow, signed it",
                fix="lock a revision an allowed signer signed",
            )


def project_policy(project: Project) -> SigningPolicy:
    """The signing policy `project`'s pyproject.toml declares."""
    return SigningPolicy(
        require=project.require_signatures,
        signers=project.signers,
        trusted_root=project.sigstore_trusted_root,
    )


def _entry(repo: str, signers: tuple[str, ...]) -> str:
    """A `[tool.kernlock.signers]` line allowing `signers` for `repo`."""
    return f"{json.dumps(repo)} = [{', '.join(json.dumps(s) for s in dict.fromkeys(signers))}]"
