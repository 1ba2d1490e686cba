"""Build fixture kernel repositories (real git repos) from declarative TOML files.

Each ``fixtures/<org>__<name>.toml`` describes one kernel repository::

    repo = "kernels-community/flash-attn2"
    template = "attention"          # directory under fixtures/templates/
    layout = "package"              # "package": build/<variant>/<python_name>/__init__.py
                                    # "flat":    build/<variant>/__init__.py
                                    # "kernel-builder": flat, plus the compiled library from
                                    #   fixtures/native/<native>/ and the <python_name>/ compat
                                    folder # "zip":     build/<variant>/<id>.zip holding the
                                    package's files #   (metadata `build-layout = "zip"`, kernels
                                    0.19)
    native = "relu"                 # kernel-builder layout: the library's folder under
    fixtures/native/ kernel-depends = [{ repo-id = "kernels-community/activation", version = 1 }]  #
    optional

    [variant-sets]                  # optional named groups of build variants
    cuda = ["torch210-cxx11-cu128-x86_64-linux", ...]

    [[commits]]                     # in order; every commit is a full snapshot of the repo
    label = "flash-attn2 v1 #1"     # build label, embedded in the kernel code (KERNEL_IDENTITY)
    branch = "v1"                   # branch the commit is made on (parent: its current tip)
    from = "main"                   # optional: parent for a new branch
    append = true                   # optional: keep the parent's files byte for byte and add these
    variants
                                    #   (kernel-builder appending a build for a new Torch to a
                                    version branch)
    also = ["main"]                 # optional: other branches moved to this commit
    tags = ["v1.0.0"]               # optional: lightweight tags on this commit
    date = 2026-03-01T12:00:00Z     # optional: the commit's date (author and committer; default:
                                    #   one hour after the previous commit's, from 2026-01-01)
    variants = ["cuda", "torch213-cxx11-cpu-x86_64-linux"]   # set names or variant names
    version = 1                     # optional: metadata version (default: N of branch vN, else 1)
    archs = ["10.0"]                # optional: the GPU archs its CUDA/ROCm builds list (default:
                                    #   CUDA ["8.0", "9.0"], ROCm ["gfx942"])
    signed = true                   # optional: ship metadata.json.sigstore, a real Sigstore bundle
    over
                                    # metadata.json from the test Sigstore
                                    (kernlock.testing.sigstore), # signed as kernels-community's
                                    build workflow; or a table naming # another identity (any
                                    GitHubSigner field) or instance:
    # signed = { workflow = "https://github.com/o/r/.github/workflows/build.yaml@refs/heads/main",
    #            source-repository = "https://github.com/fork/r", issuer = "https://...", seed =
    "other" }

    [commits.metadata]              # optional: merged into every variant's metadata.json
    kernels-minver = "0.17.0"
    provenance = { kernel-builder = { version = "0.9.1", commit = "...", dirty = false } }
    digest = true                   # kernel-builder's per-file sha256 digest (the default); false:
    none;
                                    # "stale": a digest the files do not match (a build edited after
                                    signing); # "stale-lfs": only its LFS files (`.so`) do not match
    digest-algorithm = "sha512"     # optional: the digest's algorithm (default "sha256")

Commits are written with ``git fast-import`` using fixed author, committer and
dates (``date``, else one hour apart), so commit SHAs are identical across runs and machines.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import tomlkit

from kernlock.testing.build_files import (
    backend_metadata,
    bundle,
    fake_binary,
    native_library,
    template_sources,
    zip_archive,
)
from kernlock.testing.sigstore import TestSigstore

_AUTHOR = "Kernlock Fixtures <fixtures@kernlock.invalid>"
_EPOCH = 1767225600  # 2026-01-01T00:00:00Z
_COMMIT_INTERVAL = 3600
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Kernlock Fixtures",
    "GIT_AUTHOR_EMAIL": "fixtures@kernlock.invalid",
    "GIT_COMMITTER_NAME": "Kernlock Fixtures",
    "GIT_COMMITTER_EMAIL": "fixtures@kernlock.invalid",
    "GIT_AUTHOR_DATE": f"{_EPOCH} +0000",
    "GIT_COMMITTER_DATE": f"{_EPOCH} +0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}
_IDENTITY_CALL = re.compile(rb'identity\(__file__, "([^"]*)", "([^"]*)"\)')


def default_fixtures_dir() -> Path:
    """The fixture descriptions: the checkout's ``fixtures/``, or the copy shipped in the wheel."""
    checkout = Path(__file__).resolve().parents[2] / "fixtures"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parent / "_fixtures"


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run ``git`` in ``repo`` with a fixed identity and no user/system config."""
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input,
        capture_output=True,
        check=True,
        env={**os.environ, **_GIT_ENV},
    ).stdout


def build_fixture_repos(
    fixtures_dir: Path, dest: Path, also_as: Mapping[str, str] | None = None
) -> dict[str, Path]:
    """Build one bare git repo per ``*.toml`` in ``fixtures_dir`` under ``dest``.

    ``also_as`` (variant -> another name) builds each such variant a second time under the other
    name, with the same files: the suite on another Torch than the fixtures' (a matrix cell) gets
    a build for it. Returns a mapping of repo id to bare repository path.
    """
    dest.mkdir(parents=True, exist_ok=True)
    repos = {}
    for toml_path in sorted(fixtures_dir.glob("*.toml")):
        spec = tomlkit.loads(toml_path.read_text()).unwrap()
        repo_path = dest / f"{spec['repo'].replace('/', '__')}.git"
        _build_repo(spec, fixtures_dir / "templates", repo_path, also_as or {})
        repos[spec["repo"]] = repo_path
    return repos


def ensure_fixture_repos(fixtures_dir: Path, dest: Path) -> dict[str, Path]:
    """Build the fixture repos into ``dest`` unless it already holds them; returns them."""
    if not dest.is_dir() or not any(dest.glob("*.git")):
        return build_fixture_repos(fixtures_dir, dest)
    return {
        p.name.removesuffix(".git").replace("__", "/", 1): p for p in sorted(dest.glob("*.git"))
    }


def _build_repo(
    spec: Mapping[str, Any], templates_dir: Path, repo_path: Path, also_as: Mapping[str, str]
) -> None:
    # the name: `git -C parent` would take a relative repo_path from parent, not from here
    git(repo_path.parent, "init", "-q", "--bare", "-b", "main", repo_path.name)
    sigstores: dict[
        str, TestSigstore
    ] = {}  # by seed: one log per repo, so each repo's bundles are reproducible
    stream = bytearray()
    marks: dict[str, int] = {}  # branch -> mark of its tip
    snapshots: dict[int, dict[str, bytes]] = {}  # mark -> the commit's files
    for index, commit in enumerate(spec["commits"], start=1):
        branch = commit["branch"]
        parent = marks.get(branch) or marks.get(commit.get("from", ""))
        files = _render_commit(spec, commit, templates_dir, sigstores, also_as)
        if commit.get("append"):
            if parent is None:
                raise ValueError(f"{spec['repo']}: commit {commit['label']!r} appends to no parent")
            files = {
                **snapshots[parent],
                **{p: c for p, c in files.items() if p.startswith("build/")},
            }
        snapshots[index] = files
        stream += _commit_command(
            f"refs/heads/{branch}",
            mark=index,
            parent=f":{parent}" if parent else None,
            timestamp=_timestamp(commit.get("date")) or _EPOCH + index * _COMMIT_INTERVAL,
            message=commit["label"],
            files=files,
            full_snapshot=True,
        )
        marks[branch] = index
        for other in commit.get("also", []):
            stream += f"reset refs/heads/{other}\nfrom :{index}\n\n".encode()
            marks[other] = index
        for tag in commit.get("tags", []):
            stream += f"reset refs/tags/{tag}\nfrom :{index}\n\n".encode()
    git(repo_path, "fast-import", "--quiet", "--force", input=bytes(stream))


def _timestamp(date: datetime | None) -> int | None:
    """An aware datetime (a fixture's TOML ``date``, with its ``Z``) as a Unix time."""
    return None if date is None else int(date.timestamp())


def _commit_command(
    ref: str,
    *,
    mark: int | None,
    parent: str | None,
    timestamp: int,
    message: str,
    files: Mapping[str, bytes | None],
    full_snapshot: bool,
) -> bytes:
    """A ``git fast-import`` commit command."""
    msg = message.encode()
    out = bytearray(f"commit {ref}\n".encode())
    if mark is not None:
        out += f"mark :{mark}\n".encode()
    out += f"author {_AUTHOR} {timestamp} +0000\ncommitter {_AUTHOR} {timestamp} +0000\n".encode()
    out += f"data {len(msg)}\n".encode() + msg + b"\n"
    if parent is not None:
        out += f"from {parent}\n".encode()
    if full_snapshot:
        out += b"deleteall\n"
    for path, content in sorted(files.items()):
        if content is None:
            out += f"D {path}\n".encode()
        else:
            out += f"M 100644 inline {path}\ndata {len(content)}\n".encode() + content + b"\n"
    return bytes(out + b"\n")


def _render_commit(
    spec: Mapping[str, Any],
    commit: Mapping[str, Any],
    templates_dir: Path,
    sigstores: dict[str, TestSigstore],
    also_as: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """All files of one fixture commit: README plus one build directory per variant."""
    repo_id: str = spec["repo"]
    label: str = commit["label"]
    kernel_name = repo_id.split("/")[1]
    python_name = kernel_name.replace("-", "_")
    sets: Mapping[str, list[str]] = spec.get("variant-sets", {})
    variants = [v for entry in commit["variants"] for v in sets.get(entry, [entry])]
    variants += [
        other
        for v in list(variants)
        if (other := (also_as or {}).get(v)) is not None and other not in variants
    ]
    version = commit.get("version") or _branch_version(commit["branch"])
    depends = spec.get("kernel-depends", [])
    sources = template_sources(templates_dir, spec["template"])
    substitutions = {
        b"@@REPO@@": repo_id.encode(),
        b"@@BUILD@@": label.encode(),
        b"@@DEP@@": depends[0]["repo-id"].encode() if depends else b"",
    }
    layout = spec.get("layout", "package")
    library = None
    # the build id is the library's: its module and torch.ops namespace
    if layout == "kernel-builder":
        library = native_library(templates_dir.parent / "native" / spec["native"])
        substitutions[b"@@OPS@@"] = library.name.split(".")[0].encode()

    files = {"README.md": f"# {repo_id}\n\nFixture kernel, build `{label}`.\n".encode()}
    for variant in variants:
        base = f"build/{variant}"
        package = f"{base}/{python_name}" if layout == "package" else base
        # kernels 0.19 caches an import by this id: unique per build, like kernel-builder's
        build_id = (
            library.name.split(".")[0]
            if library is not None
            else f"_{python_name}_"
            f"{hashlib.sha256(f'{repo_id}@{label}/{variant}'.encode()).hexdigest()[:7]}"
        )
        metadata: dict[str, Any] = {
            "id": build_id,
            "name": kernel_name,
            "version": version,
            "license": "Apache-2.0",
            "python-depends": [],
            "backend": backend_metadata(variant, commit.get("archs")),
        }
        if depends:
            metadata["kernel-depends"] = depends
        extra = dict(commit.get("metadata", {}))
        with_digest = extra.pop("digest", True)
        algorithm = extra.pop("digest-algorithm", "sha256")
        metadata.update(extra)
        variant_files: dict[str, bytes] = {}
        for name, source in sources.items():
            for placeholder, value in substitutions.items():
                source = source.replace(placeholder, value)
            variant_files[f"{package}/{name}"] = source
        if layout == "zip":
            metadata["build-layout"] = "zip"
            variant_files = {
                f"{base}/{build_id}.zip": zip_archive(
                    {p[len(base) + 1 :]: c for p, c in variant_files.items()}
                )
            }
        elif library is not None:
            variant_files[f"{base}/{library.name}"] = library.read_bytes()
            variant_files[f"{base}/{python_name}/__init__.py"] = (
                templates_dir / "kernel-builder" / "compat.py"
            ).read_bytes()
        else:
            variant_files[f"{package}/_ops.so"] = fake_binary(f"{repo_id}/{variant}@{label}")
        # kernel-builder's per-file digest: base64 sha256 (or sha512) by path relative to the
        # variant
        if with_digest:
            metadata["digest"] = {
                "algorithm": algorithm,
                "files": {
                    path[len(base) + 1 :]: base64.b64encode(
                        hashlib.new(
                            algorithm,
                            content
                            + (
                                b"stale"
                                if with_digest == "stale"
                                or (with_digest == "stale-lfs" and path.endswith(".so"))
                                else b""
                            ),
                        ).digest()
                    ).decode()
                    for path, content in sorted(variant_files.items())
                },
            }
        files[f"{base}/metadata.json"] = (json.dumps(metadata, indent=2) + "\n").encode()
        if commit.get("signed"):
            files[f"{base}/metadata.json.sigstore"] = bundle(
                files[f"{base}/metadata.json"], commit["signed"], sigstores
            )
        files.update(variant_files)
    return files


def _branch_version(branch: str) -> int:
    return int(branch[1:]) if re.fullmatch(r"v\d+", branch) else 1


def rev_parse(repo_path: Path, rev: str) -> str:
    """The commit SHA of ``rev`` (branch, tag or SHA) in ``repo_path``."""
    return (
        git(repo_path, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")
        .decode()
        .strip()
    )


def push_commit(
    repo_path: Path,
    branch: str,
    files: Mapping[str, bytes | None],
    message: str,
    date: datetime | None = None,
) -> str:
    """Add a commit on ``branch`` changing ``files`` (``None`` deletes), dated ``date`` (aware),
    else one interval after its parent, so SHAs stay deterministic; returns its SHA."""
    parent = rev_parse(repo_path, f"refs/heads/{branch}")
    timestamp = _timestamp(date) or (
        int(git(repo_path, "log", "-1", "--format=%ct", parent)) + _COMMIT_INTERVAL
    )
    stream = _commit_command(
        f"refs/heads/{branch}",
        mark=None,
        parent=parent,
        timestamp=timestamp,
        message=message,
        files=files,
        full_snapshot=False,
    )
    git(repo_path, "fast-import", "--quiet", "--force", input=stream)
    return rev_parse(repo_path, f"refs/heads/{branch}")


def move_branch(repo_path: Path, branch: str, to_sha: str) -> None:
    """Point ``branch`` at ``to_sha`` (force), like a force-push to the Hub."""
    git(repo_path, "update-ref", f"refs/heads/{branch}", to_sha)


def advance_branch(repo_path: Path, branch: str, date: datetime | None = None) -> str:
    """Add a commit on ``branch`` (dated ``date``, see `push_commit`) whose kernels carry the build
    label ``<label> (moved)``."""
    tip = rev_parse(repo_path, f"refs/heads/{branch}")
    paths = git(repo_path, "ls-tree", "-r", "--name-only", "-z", tip, "build").decode().split("\0")
    changed = {}
    for path in paths:
        if path.endswith("/__init__.py"):
            source = git(repo_path, "cat-file", "blob", f"{tip}:{path}")
            changed[path] = _IDENTITY_CALL.sub(
                lambda m: b'identity(__file__, "%s", "%s (moved)")' % (m[1], m[2]), source
            )
    return push_build(repo_path, branch, changed, f"Move {branch}", date=date)


def push_build(
    repo_path: Path,
    branch: str,
    files: Mapping[str, bytes | None],
    message: str,
    sigstore: TestSigstore | None = None,
    date: datetime | None = None,
) -> str:
    """`push_commit` as a publisher's rebuild: each build ``files`` touches gets a new id and a
    matching digest, and, when it was signed, a new bundle from the same signer (``sigstore``: the
    test Sigstore that signed it)."""
    tip = rev_parse(repo_path, f"refs/heads/{branch}")
    sigstore = sigstore or TestSigstore()
    rebuilt: dict[str, bytes | None] = {}
    for base in sorted(
        {"/".join(path.split("/")[:2]) for path in files if path.startswith("build/")}
    ):
        if f"{base}/metadata.json" in files:
            continue
        metadata = json.loads(git(repo_path, "cat-file", "blob", f"{tip}:{base}/metadata.json"))
        metadata["id"] = (
            f"{metadata['id']}_{hashlib.sha256(f'{tip}{message}'.encode()).hexdigest()[:7]}"
        )
        digest = metadata.get("digest", {}).get("files")
        algorithm = metadata.get("digest", {}).get("algorithm", "sha256")
        for path, content in files.items():
            if digest is not None and path.startswith(f"{base}/"):
                if content is None:
                    digest.pop(path[len(base) + 1 :], None)
                else:
                    digest[path[len(base) + 1 :]] = base64.b64encode(
                        hashlib.new(algorithm, content).digest()
                    ).decode()
        rebuilt[f"{base}/metadata.json"] = signed = (json.dumps(metadata, indent=2) + "\n").encode()
        if f"{base}/metadata.json.sigstore" not in files and _exists(
            repo_path, tip, f"{base}/metadata.json.sigstore"
        ):
            bundle = git(repo_path, "cat-file", "blob", f"{tip}:{base}/metadata.json.sigstore")
            rebuilt[f"{base}/metadata.json.sigstore"] = sigstore.resign(bundle, signed)
    return push_commit(repo_path, branch, {**files, **rebuilt}, message, date)


def _exists(repo_path: Path, commit: str, path: str) -> bool:
    return bool(git(repo_path, "ls-tree", "--name-only", commit, path).strip())


def rewrite_branch(repo_path: Path, branch: str) -> str:
    """Replace the tip of ``branch`` by another commit and garbage-collect the old one.

    What a force-push (or the Hub's history squash) leaves: the old tip is gone, and the
    Hub answers 404 for it. Returns the new tip.
    """
    old = rev_parse(repo_path, f"refs/heads/{branch}")
    move_branch(repo_path, branch, rev_parse(repo_path, f"{old}^"))
    new = push_commit(
        repo_path, branch, {"README.md": f"{branch} rewritten\n".encode()}, f"Rewrite {branch}"
    )
    git(repo_path, "reflog", "expire", "--expire=now", "--all")
    git(repo_path, "gc", "--quiet", "--prune=now")
    return new
