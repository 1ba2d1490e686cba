"""Kernels as OCI artifacts (issue 47): `vendor --to` a real CNCF registry or an OCI layout, then `sync --from`,
`KERNLOCK_MIRROR` and `kernlock run` with 0 Hub requests; tampered blobs refused with both digests."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import CPU, FA2, LockedProjectFactory, cli, run_kernlock
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock.testing.hub import TestHub
from registry import RunningRegistry, running_registry
from scripts.harness import PRELUDE, ok, run

TRAIN = PRELUDE + f"net = tiny.model({FA2!r})\ntiny.result(**tiny.step_through(net))\n"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RunningRegistry]:
    """The CNCF registry on 127.0.0.1 with a throwaway storage directory."""
    root = tmp_path / "registry"
    root.mkdir()
    with running_registry(root) as running:
        yield running


def fresh_home(tmp_path: Path, name: str) -> dict[str, str]:
    """A new, empty HF_HOME (and nothing else of the Hub cache's) for a command."""
    return {"HF_HOME": str(tmp_path / name)}


def test_vendor_to_a_registry_then_sync_from_and_run_train_with_no_hub(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    variant = entry.variant_for(CPU)
    (project / "train.py").write_text(TRAIN)
    url = registry.url()
    pushed = cli("vendor", "--to", url, "--json", cwd=project)
    assert pushed.exit_code == 0, pushed.output
    report = json.loads(pushed.output)
    recorded = load_lockfile(project / "kernels.lock")
    [mirror] = recorded.mirrors
    assert (mirror.url, mirror.index) == (url, report["index"]) and recorded.version == "1.5"
    assert report["location"] == f"{url}@{mirror.index}" and report["files"] == len(variant.files)
    assert recorded.kernels == lock.kernels
    assert cli("lock", "--check", cwd=project).exit_code == 0  # a re-lock keeps the record: no churn
    # What the registry holds: the lock's index under the tag, a manifest per variant, each file a blob by its sha256.
    index = json.loads(registry.get("/v2/team/kernels/manifests/v1", "application/vnd.oci.image.index.v1+json"))
    assert index["artifactType"] == "application/vnd.kernlock.lock.v1"
    [descriptor] = index["manifests"]
    assert descriptor["annotations"] == {"dev.kernlock.repo": FA2, "dev.kernlock.commit": entry.commit,
                                         "dev.kernlock.variant": variant.name}
    manifest = json.loads(registry.get(f"/v2/team/kernels/manifests/{descriptor['digest']}",
                                       "application/vnd.oci.image.manifest.v1+json"))
    assert manifest["annotations"]["dev.kernlock.targets"] == CPU
    assert {(layer["annotations"]["org.opencontainers.image.title"], layer["digest"]) for layer in manifest["layers"]} == {
        (f.path, f"sha256:{f.sha256}") for f in variant.files}
    for locked in variant.files:
        assert registry.blob_data(f"sha256:{locked.sha256}").stat().st_size == locked.size
    # A fresh HF_HOME fills from the registry alone (the Hub counts 0 requests), by the digest the lock records.
    hub.reset_counts()
    synced = run_kernlock("sync", "--from", url, cwd=project, env=fresh_home(tmp_path, "node"))
    assert synced.returncode == 0, synced.stderr
    assert f"{len(variant.files)} downloaded" in synced.stdout
    assert hub.log == []
    verified = run_kernlock("verify", "--cache", cwd=project, env={**fresh_home(tmp_path, "node"), "HF_HUB_OFFLINE": "1"})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # Then the Hub goes away: `kernlock run -- python train.py` trains through the locked build from that cache.
    hub.stop()
    trained = ok(run([os.sys.executable, "-m", "kernlock", "run", "--", os.sys.executable, "train.py"], project,
                     **fresh_home(tmp_path, "node")))
    [used] = trained["used"]
    assert (used["repo"], used["commit"], used["variant"]) == (FA2, entry.commit, variant.name)
    assert trained["loss"] > 0
