"""OCI locations (`oci://`, `oci-layout:`), the lock's `[[mirror]]` records and the artifact's shape (issue 47)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from helpers import sample_lockfile
from kernlock._internal.lockfile.mirror_edit import carry_mirrors, with_mirror
from kernlock._internal.lockfile.serialize import dumps_lockfile, parse_lockfile
from kernlock._internal.oci.artifact import digest_of, lock_index, variant_manifest
from kernlock._internal.spec.oci_ref import OciRef, parse_ref
from kernlock.errors import LockfileError, UsageError

pytestmark = pytest.mark.unit
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("text, expected", [
    ("oci://127.0.0.1:5000/team/kernels", OciRef(host="127.0.0.1:5000", repository="team/kernels")),
    ("oci://ghcr.io/org/team/kernels:v1", OciRef(host="ghcr.io", repository="org/team/kernels", tag="v1")),
    (f"oci://localhost:5000/a/b:v1@{DIGEST}", OciRef(host="localhost:5000", repository="a/b", tag="v1", digest=DIGEST)),
    ("oci-layout:/srv/kernels", OciRef(layout=Path("/srv/kernels"))),
    (f"oci-layout:./out:v2@{DIGEST}", OciRef(layout=Path("out"), tag="v2", digest=DIGEST)),
])
def test_locations_parse(text: str, expected: OciRef) -> None:
    assert parse_ref(text) == expected


def test_plain_http_only_on_loopback_and_the_default_tag() -> None:
    assert parse_ref("oci://127.0.0.1:5000/a/b").plain_http and parse_ref("oci://localhost/a/b").plain_http
    assert not parse_ref("oci://registry.example.com/a/b").plain_http
    ref = parse_ref("oci://registry.example.com/a/b")
    assert ref.reference == "latest" and ref.at(DIGEST).reference == DIGEST
    assert str(ref.at(DIGEST)) == f"oci://registry.example.com/a/b@{DIGEST}" and ref.location == "oci://registry.example.com/a/b"


@pytest.mark.parametrize("text, problem", [
    ("https://ghcr.io/a/b", "starts with neither oci:// nor oci-layout:"),
    ("oci://ghcr.io/kernels", "is not NAMESPACE/NAME"),
    ("oci://ghcr.io/a/b:no/tag", "is not NAMESPACE/NAME"),
    ("oci://ghcr.io/a/b@sha256:abc", "is not a sha256 digest"),
    ("oci://me:pw@ghcr.io/a/b", "credentials in the URL are refused"),
    ("oci-layout:", "names no directory"),
])
def test_bad_locations_are_one_line_with_a_fix(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as raised:
        parse_ref(text)
    assert problem in raised.value.message and "\n" not in str(raised.value) and raised.value.fix
    assert "pw" not in str(raised.value)


def test_a_mirror_record_round_trips_and_keeps_older_locks_as_they_were() -> None:
    lock = sample_lockfile()
    plain = dumps_lockfile(lock)
    assert "[[mirror]]" not in plain and 'version = "1.0"' in plain  # no push, no change of format
    recorded = with_mirror(lock, "oci://ghcr.io/a/b:v1", DIGEST)
    text = dumps_lockfile(recorded)
    assert 'version = "1.6"' in text and f'[[mirror]]\nurl = "oci://ghcr.io/a/b:v1"\nindex = "{DIGEST}"' in text
    parsed = parse_lockfile(text)
    assert (parsed.mirrors, parsed.version) == (recorded.mirrors, "1.6") and dumps_lockfile(parsed) == text
    again = with_mirror(recorded, "oci://ghcr.io/a/b:v1", "sha256:" + "cd" * 32)
    assert [m.index for m in again.mirrors] == ["sha256:" + "cd" * 32]  # one record per location


def test_a_relock_keeps_the_records_only_for_the_same_pins() -> None:
    recorded = with_mirror(sample_lockfile(), "oci-layout:/srv/k", DIGEST)
    assert carry_mirrors(recorded, sample_lockfile()) == recorded
    moved = replace(sample_lockfile(), kernels=(replace(sample_lockfile().kernels[0], commit="b" * 40),))
    assert carry_mirrors(recorded, moved) == moved and not moved.mirrors


@pytest.mark.parametrize("url, index, problem", [
    ("oci://ghcr.io/a/b", "sha256:xyz", "mirror[0].index: expected sha256:"),
    (f"oci://ghcr.io/a/b@{DIGEST}", DIGEST, "mirror[0].url: names a digest"),
    ("s3://bucket/k", DIGEST, "mirror[0].url: 's3://bucket/k' is not an OCI location"),
])
def test_a_hand_edited_mirror_record_is_refused_with_its_key(url: str, index: str, problem: str) -> None:
    text = dumps_lockfile(with_mirror(sample_lockfile(), "oci://ghcr.io/a/b", DIGEST))
    text = text.replace('url = "oci://ghcr.io/a/b"', f'url = "{url}"').replace(f'index = "{DIGEST}"', f'index = "{index}"')
    with pytest.raises(LockfileError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_lockfile(text)


def test_the_artifacts_are_canonical_and_carry_the_lock_s_digests() -> None:
    [kernel] = sample_lockfile().kernels
    [variant] = kernel.variants
    artifact = variant_manifest(kernel, variant)
    manifest = json.loads(artifact.body)
    assert [(layer["annotations"]["org.opencontainers.image.title"], layer["digest"], layer["size"])
            for layer in manifest["layers"]] == [("a.py", "sha256:" + "2" * 64, 4), ("b.py", "sha256:" + "1" * 64, 3)]
    assert manifest["annotations"] == {"dev.kernlock.repo": "org/repo", "dev.kernlock.commit": "a" * 40,
                                       "dev.kernlock.variant": variant.name,
                                       "dev.kernlock.targets": "torch2.13-cxx11-cpu-x86_64-linux"}
    index = lock_index([artifact, artifact])
    assert json.loads(index)["manifests"] == [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "artifactType": "application/vnd.kernlock.variant.v1",
        "digest": artifact.digest, "size": len(artifact.body),
        "annotations": {"dev.kernlock.repo": "org/repo", "dev.kernlock.commit": "a" * 40, "dev.kernlock.variant": variant.name}}]
    assert digest_of(lock_index([variant_manifest(kernel, variant)])) == digest_of(index)  # no timestamps


def test_a_manifest_listing_another_digest_than_the_lock_is_refused_naming_both() -> None:
    from kernlock._internal.oci.artifact import file_layers
    from kernlock.errors import IntegrityError

    [kernel] = sample_lockfile().kernels
    [variant] = kernel.variants
    ref = parse_ref("oci://ghcr.io/team/kernels:v1").at(DIGEST)
    assert file_layers(variant_manifest(kernel, variant).body, kernel, variant, ref) == {
        f.path: f"sha256:{f.sha256}" for f in variant.files}
    other = replace(variant, files=(replace(variant.files[0], sha256="9" * 64), variant.files[1]))
    with pytest.raises(IntegrityError) as raised:
        file_layers(variant_manifest(kernel, other).body, kernel, variant, ref)
    assert raised.value.message == (
        f"org/repo: oci://ghcr.io/team/kernels:v1@{DIGEST} lists {variant.name}/b.py as sha256:{'9' * 64} (3 bytes), "
        f"but kernels.lock expects sha256:{'1' * 64} (3 bytes); nothing was downloaded")
    assert raised.value.fix == "push this lock's kernels there again: `kernlock vendor --to oci://ghcr.io/team/kernels:v1`"
