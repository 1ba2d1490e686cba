"""The lock model: `from_dict`/`to_dict` round trips on every class, key paths as data, format versions."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from kernlock._internal.lockfile.entries import (
    SIGNATURE_FILE,
    LockedFile,
    LockedKernel,
    LockedVariant,
    Lockfile,
    Override,
    Provenance,
)
from kernlock._internal.lockfile.format_version import LOCK_VERSION
from kernlock._internal.settings import UPGRADE_FIX
from kernlock._internal.spec.target import Target, parse_target
from kernlock.errors import LockfileError, LockfileVersionError

CPU = parse_target("torch2.13-cxx11-cpu-x86_64-linux")
CUDA = parse_target("torch2.9-cxx11-cu128-x86_64-linux")

FILE = LockedFile(path="pkg/_ops.py", sha256="1" * 64, size=12)
PROVENANCE = Provenance(builder_version="0.9", builder_commit="b" * 40, builder_dirty=False, source_commit="c" * 40)
SIGNED = LockedVariant(
    name="torch213-cxx11-cpu-x86_64-linux", targets=(CPU,), kernels_minver="0.17.2", python_depends=("einops",),
    digest="sha256", signed=True, provenance=PROVENANCE,
    files=(FILE, LockedFile(path=SIGNATURE_FILE, sha256="2" * 64, size=40)),
)
UNIVERSAL = LockedVariant(name="torch-universal", targets=(CUDA,), files=(FILE,))
OVERRIDE = Override(when="torch2.9-*", use="v0", reason="regression in v1 on CUDA 12.8")
RENAMED = LockedKernel(
    spec="old/name@v1", repo="new/name", aliases=("old/name",), override=OVERRIDE, requested=("old/name@v1",),
    version=1, ref="v1", commit="a" * 40, resolution="version 1 → branch v1", trust="allowlist",
    dependency_of=("z/z@v2",), depends=("d/d@v1",), build_variants=(SIGNED.name, UNIVERSAL.name),
    variants=(UNIVERSAL, SIGNED),
)
BARE = LockedKernel(spec="a/b", repo="a/b", commit="d" * 40, resolution="branch main", trust="trusted-publisher")
LOCK = Lockfile(targets=(CPU, CUDA), inputs=("a/b", "old/name@v1"), resolved_with={"kernlock": "0.1.0"},
                kernels=(BARE, RENAMED))


@pytest.mark.parametrize("value", [FILE, PROVENANCE, Provenance(), SIGNED, UNIVERSAL, OVERRIDE, RENAMED, BARE, LOCK,
                                   Lockfile(targets=(), inputs=())],
                         ids=lambda v: type(v).__name__)
def test_every_class_round_trips_through_its_dict_and_json(value: Any) -> None:
    data = value.to_dict()
    assert type(value).from_dict(data) == value
    through_json = json.loads(json.dumps(data))
    assert type(value).from_dict(through_json) == value
    assert type(value).from_own_dict(through_json) == value


def test_to_dict_uses_the_lock_keys_and_leaves_defaults_out() -> None:
    assert BARE.to_dict() == {"spec": "a/b", "repo": "a/b", "commit": "d" * 40, "resolution": "branch main",
                              "trust": "trusted-publisher", "build-variants": []}
    data = RENAMED.to_dict()
    assert list(data) == ["spec", "repo", "aliases", "override", "requested", "version", "ref", "commit", "resolution",
                          "trust", "dependency-of", "depends", "build-variants", "variant"]
    assert data["override"] == {"when": "torch2.9-*", "use": "v0", "reason": "regression in v1 on CUDA 12.8"}
    assert data["variant"][1]["provenance"] == {"builder-version": "0.9", "builder-commit": "b" * 40,
                                                "builder-dirty": False, "source-commit": "c" * 40}
    assert "signed" not in data["variant"][0] and data["variant"][1]["signed"] is True
    assert list(LOCK.to_dict()) == ["version", "targets", "inputs", "resolved-with", "kernel"]
    assert "kernel" not in Lockfile(targets=(), inputs=()).to_dict()


def test_targets_are_parsed_at_load_and_written_as_their_text() -> None:
    data = LOCK.to_dict()
    assert data["targets"] == [str(CPU), str(CUDA)] and data["kernel"][1]["variant"][0]["targets"] == [str(CUDA)]
    lock = Lockfile.from_dict(data)
    assert lock.targets == (CPU, CUDA) and all(isinstance(t, Target) for t in lock.targets)
    assert lock.kernels[1].variants[0].targets[0].backend == "cu128"
    assert lock.kernels[1].variant_for(CPU) == SIGNED and lock.kernels[1].variant_for(str(CUDA)) == UNIVERSAL
    assert lock.uncovered(CUDA) == ["a/b"] and lock.kernel("old/name@v1", CPU) == RENAMED


def test_the_model_is_frozen_keyword_only_and_slotted() -> None:
    with pytest.raises(AttributeError):
        FILE.size = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        LockedFile("a.py", "1" * 64, 1)  # type: ignore[call-arg]
    assert not hasattr(FILE, "__dict__")


def _lock_with(edit) -> dict[str, Any]:
    data = json.loads(json.dumps(LOCK.to_dict()))
    edit(data)
    return data


@pytest.mark.parametrize(
    ("edit", "key_path", "problem"),
    [
        (lambda d: d["kernel"][1]["variant"][1]["files"][0].update(sha256="xyz"),
         ("kernel", 1, "variant", 1, "files", 0, "sha256"), "expected 64 lower-case hex characters"),
        (lambda d: d["kernel"][1]["variant"][1]["provenance"].update({"source-dirty": "yes"}),
         ("kernel", 1, "variant", 1, "provenance", "source-dirty"), "expected a boolean, got str"),
        (lambda d: d["kernel"][1]["override"].pop("reason"), ("kernel", 1, "override", "reason"), "missing required key"),
        (lambda d: d["kernel"][1].update(override="torch2.9"), ("kernel", 1, "override"), "expected a table, got str"),
        (lambda d: d["kernel"][1]["variant"].append(7), ("kernel", 1, "variant", 2), "expected a table, got int"),
        (lambda d: d["kernel"][1]["variant"][0].update(name="../x"), ("kernel", 1, "variant", 0, "name"),
         "'../x' is not a build variant name"),
        (lambda d: d["kernel"][1]["variant"][1].update(signed=False), ("kernel", 1, "variant", 1, "signed"),
         f"says not signed, but the files include {SIGNATURE_FILE}"),
        (lambda d: d["kernel"][0].update(version=True), ("kernel", 0, "version"), "expected an integer, got a boolean"),
        (lambda d: d["kernel"].append(d["kernel"][0]), ("kernel", 2, "spec"), "duplicate entry for 'a/b'"),
        (lambda d: d.update(inputs="a/b"), ("inputs",), "expected an array, got str"),
        (lambda d: d["kernel"][1]["variant"][0]["targets"].append("torch2-cpu"), ("kernel", 1, "variant", 0, "targets", 1),
         "invalid target 'torch2-cpu'"),
    ],
)
def test_nested_errors_carry_the_full_key_path(edit, key_path: tuple[str | int, ...], problem: str) -> None:
    with pytest.raises(LockfileError) as raised:
        Lockfile.from_dict(_lock_with(edit), source="kernels.lock")
    assert raised.value.key_path == key_path
    assert raised.value.problem == problem
    assert str(raised.value).startswith(f"kernels.lock: {raised.value.key}: {problem}; ")


def test_a_nested_class_reports_paths_relative_to_itself() -> None:
    with pytest.raises(LockfileError) as raised:
        LockedVariant.from_dict({"name": "v", "targets": [], "files": [{"path": "/etc/passwd", "sha256": "1" * 64, "size": 1}]})
    assert raised.value.key_path == ("files", 0, "path") and raised.value.source is None


@pytest.mark.parametrize("path", ["a//b", "a/", "/a", "../a", "a/../b", "a\\b", "a\x00b", ""])
def test_the_lock_refuses_a_file_path_the_resolver_refuses(path: str) -> None:
    """One rule (`is_safe_relpath`) for a file path in the lock and in the Hub's listing of a commit."""
    from kernlock._internal.hub.responses import TreeFile
    from kernlock._internal.hub.variants import group_variants
    from kernlock.errors import ResolutionError

    with pytest.raises(LockfileError, match="is not a safe relative path"):
        LockedFile.from_dict({"path": path, "sha256": "1" * 64, "size": 1})
    with pytest.raises(ResolutionError, match="unsafe file path"):
        group_variants("a/b", "c" * 40, [TreeFile(path=f"build/v/{path}", size=1, blob_id="b" * 40, lfs_sha256=None)])


def test_a_newer_minor_is_read_without_its_unknown_keys(caplog: pytest.LogCaptureFixture) -> None:
    def future(d: dict[str, Any]) -> None:
        d.update({"version": "1.8", "created-by": "kernlock 9"})
        d["kernel"][1]["variant"][1]["files"][0]["blake3"] = "…"
        d["kernel"][1]["override"]["until"] = "2027"

    with caplog.at_level(logging.WARNING, logger="kernlock"):
        lock = Lockfile.from_dict(_lock_with(future), source="locks/k.lock")
    assert lock.kernels == LOCK.kernels and lock.version == "1.8" and lock.newer_format
    assert (f"locks/k.lock: written by a newer kernlock (lock format 1.8; this one reads {LOCK_VERSION}); ignoring created-by, "
            "kernel[1].variant[1].files[0].blake3, kernel[1].override.until") in caplog.text


def test_unknown_keys_of_the_current_minor_are_refused_with_their_path() -> None:
    with pytest.raises(LockfileError) as raised:
        Lockfile.from_dict(_lock_with(lambda d: d["kernel"][0].update(surprise=1)))
    assert raised.value.key_path == ("kernel", 0, "surprise")
    assert raised.value.fix == "upgrade kernlock, or re-resolve every pin with `kernlock lock --upgrade`"


def test_a_newer_major_is_refused_with_the_upgrade() -> None:
    with pytest.raises(LockfileVersionError) as raised:
        Lockfile.from_dict(_lock_with(lambda d: d.update(version="2.0")), source="kernels.lock")
    assert raised.value.key_path == ("version",)
    assert str(raised.value) == ("kernels.lock: version: lock format version 2.0 is newer than this kernlock understands "
                                 f"({LOCK_VERSION}); fix: " + UPGRADE_FIX)


@pytest.mark.parametrize("name", ["-rf", ".hidden", "_x", ".", ".."])
def test_the_lock_refuses_variant_names_the_resolver_refuses(name: str) -> None:
    from kernlock._internal.spec.ids import is_variant_name

    assert not is_variant_name(name)
    with pytest.raises(LockfileError, match="is not a build variant name"):
        Lockfile.from_dict(_lock_with(lambda d: d["kernel"][1]["variant"][0].update(name=name)), source="kernels.lock")
