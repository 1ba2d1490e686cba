"""Kernels as OCI artifacts (issue 47): `vendor --to` a real CNCF registry or an OCI layout, then `sync --from`,
`KERNLOCK_MIRROR` and `kernlock run` with 0 Hub requests; tampered blobs refused with both digests."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import (
    ACTIVATION,
    CPU,
    FA2,
    RELU,
    REPO_ROOT,
    UNIVERSAL,
    LockedProjectFactory,
    cli,
    markdown_blocks,
    run_bash,
    run_kernlock,
)
from kernlock._internal.lockfile.serialize import load_lockfile
from kernlock._internal.oci.artifact import variant_manifest
from kernlock.testing.hub import TestHub
from registry import RunningRegistry, running_registry
from scripts.harness import PRELUDE, child_env, ok, run

CPU_212 = "torch2.12-cxx11-cpu-x86_64-linux"
TRAIN = PRELUDE + f"net = tiny.model({FA2!r})\ntiny.result(**tiny.step_through(net))\n"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[RunningRegistry]:
    """The CNCF registry on 127.0.0.1 with a throwaway storage directory."""
    root = tmp_path / "registry"
    root.mkdir()
    with running_registry(root) as running:
        yield running


def train(project: Path, **env: str) -> dict:
    """`kernlock run -- python train.py` in `project`: what its one training step used."""
    return ok(run([sys.executable, "-m", "kernlock", "run", "--", sys.executable, "train.py"], project, **env))


def fresh_home(tmp_path: Path, name: str) -> dict[str, str]:
    """A new, empty HF_HOME (and nothing else of the Hub cache's) for a command."""
    return {"HF_HOME": str(tmp_path / name)}


def node_env(registry: RunningRegistry, **extra: str) -> dict[str, str]:
    """What the block's shell gets: `$REGISTRY`, and `tiny` (train.py's helpers) importable."""
    return {"REGISTRY": registry.host, "PYTHONPATH": child_env()["PYTHONPATH"], **extra}


def registry_block() -> tuple[str, str]:
    """The bash block of docs/how-to/clusters.md's "OCI registry" section, as its two parts: the push (where the
    Hub is reachable) and the node's lines."""
    page = (REPO_ROOT / "docs" / "how-to" / "clusters.md").read_text(encoding="utf-8")
    [block] = [b for b in markdown_blocks(page, "bash") if "vendor --to" in b]
    push, node = block.split("# on every node", 1)
    return push, "# on every node" + node


def trained_by(proc: subprocess.CompletedProcess) -> dict:
    """What the training step of `train.py` reported (`tiny.result`), failing with the output if it did not run."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
def test_vendor_to_a_registry_then_sync_from_and_run_train_with_no_hub(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    """The clusters page's block as written: the push, then on a fresh node `sync --from` and `kernlock run -- python
    train.py` train through the locked build with 0 Hub requests, and again with the Hub stopped."""
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    variant = entry.variant_for(CPU)
    (project / "train.py").write_text(TRAIN)
    push, node = registry_block()
    url = f"oci://{registry.host}/team/kernels:v1"
    pushed = run_bash(push, project, **node_env(registry))
    assert pushed.returncode == 0, pushed.stderr
    recorded = load_lockfile(project / "kernels.lock")
    [mirror] = recorded.mirrors
    assert mirror.url == url and recorded.version == "1.6" and recorded.kernels == lock.kernels
    assert f"to {url}@{mirror.index}; the lock records it" in pushed.stdout
    assert cli("lock", "--check", cwd=project).exit_code == 0  # a re-lock keeps the record: no churn
    # What the registry holds: the lock's index under the tag, a manifest per variant, each file a blob by its sha256.
    index = registry.get("/v2/team/kernels/manifests/v1", "application/vnd.oci.image.index.v1+json")
    assert "sha256:" + hashlib.sha256(index).hexdigest() == mirror.index
    assert json.loads(index)["artifactType"] == "application/vnd.kernlock.lock.v1"
    [descriptor] = json.loads(index)["manifests"]
    assert descriptor["annotations"] == {"dev.kernlock.repo": FA2, "dev.kernlock.commit": entry.commit,
                                         "dev.kernlock.variant": variant.name}
    manifest = json.loads(registry.get(f"/v2/team/kernels/manifests/{descriptor['digest']}",
                                       "application/vnd.oci.image.manifest.v1+json"))
    assert manifest["annotations"]["dev.kernlock.targets"] == CPU
    assert {(layer["annotations"]["org.opencontainers.image.title"], layer["digest"]) for layer in manifest["layers"]} == {
        (f.path, f"sha256:{f.sha256}") for f in variant.files}
    for locked in variant.files:
        assert registry.blob_data(f"sha256:{locked.sha256}").stat().st_size == locked.size
    # A fresh node: the registry alone fills its HF_HOME and the training step runs; the Hub counts 0 requests.
    hub.reset_counts()
    first = run_bash(node, project, **node_env(registry, **fresh_home(tmp_path, "node-a")))
    assert f"synced into {tmp_path / 'node-a' / 'hub'}: 1 variant, {len(variant.files)} files verified, " \
           f"{len(variant.files)} downloaded" in first.stdout
    [used] = trained_by(first)["used"]
    assert (used["repo"], used["commit"], used["variant"]) == (FA2, entry.commit, variant.name)
    assert hub.log == []
    verified = run_kernlock("verify", "--cache", cwd=project, env={**fresh_home(tmp_path, "node-a"), "HF_HUB_OFFLINE": "1"})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # The same on another fresh node with the Hub stopped.
    hub.stop()
    [used] = trained_by(run_bash(node, project, **node_env(registry, **fresh_home(tmp_path, "node-b"))))["used"]
    assert (used["commit"], used["variant"]) == (entry.commit, variant.name)


@pytest.mark.slow
def test_kernlock_mirror_feeds_the_first_load_of_a_cold_node(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    """No sync at all: under `KERNLOCK_MIRROR`, `kernlock run`'s first load pulls the missing files from the
    registry (offline for the Hub, and with 0 requests to it), by the digest the lock records for the location."""
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    (project / "train.py").write_text(TRAIN)
    assert cli("vendor", "--to", registry.url(), cwd=project).exit_code == 0
    hub.reset_counts()
    node = {**fresh_home(tmp_path, "cold"), "KERNLOCK_MIRROR": registry.url(), "HF_HUB_OFFLINE": "1"}
    trained = train(project, **node)
    [used] = trained["used"]
    assert (used["commit"], used["variant"]) == (entry.commit, entry.variant_for(CPU).name)
    assert hub.log == []
    assert "GET /v2/team/kernels/manifests/sha256:" in registry.log.read_text()  # the recorded index, by digest


def test_a_blob_changed_in_the_registry_storage_is_refused_naming_the_file_and_both_digests(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    variant = entry.variant_for(CPU)
    assert cli("vendor", "--to", registry.url(), cwd=project).exit_code == 0
    locked = next(f for f in variant.files if f.path.endswith(".py") and f.size > 0)
    data = registry.blob_data(f"sha256:{locked.sha256}")
    changed = data.read_bytes().replace(b"torch", b"TORCH", 1)  # same size, other bytes
    assert changed != data.read_bytes()
    data.write_bytes(changed)
    actual = hashlib.sha256(changed).hexdigest()
    node = fresh_home(tmp_path, "node")
    refused = run_kernlock("sync", "--from", registry.url(), cwd=project, env=node)
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"kernlock: error: {FA2}: {registry.url()}@sha256:")
    assert f"sent {variant.name}/{locked.path} with sha256:{actual} ({locked.size} bytes), but kernels.lock " \
           f"expects sha256:{locked.sha256} ({locked.size} bytes); nothing was kept" in line
    assert not list((tmp_path / "node").rglob(locked.sha256))  # no blob, no partial kept
    # The fix it prints works: `kernlock sync` where the Hub is reachable.
    assert "fix: fetch it from the Hub instead: run `kernlock sync` where the Hub is reachable" in line
    fixed = run_kernlock("sync", cwd=project, env=node)
    assert fixed.returncode == 0, fixed.stderr


def test_an_oci_layout_on_disk_works_the_same_for_push_and_pull(
    hub: TestHub, locked_project: LockedProjectFactory, tmp_path: Path
) -> None:
    """`oci-layout:DIR` (an image volume, an air gap): the same artifacts in an OCI image layout, pulled with 0 Hub
    requests and checked as from a registry."""
    project, lock = locked_project([FA2])
    [entry] = lock.kernels
    variant = entry.variant_for(CPU)
    layout = tmp_path / "layout"
    pushed = cli("vendor", "--to", f"oci-layout:{layout}", cwd=project)
    assert pushed.exit_code == 0, pushed.output
    [mirror] = load_lockfile(project / "kernels.lock").mirrors
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    [tagged] = json.loads((layout / "index.json").read_text())["manifests"]
    assert tagged["digest"] == mirror.index and tagged["annotations"] == {"org.opencontainers.image.ref.name": "latest"}
    for locked in variant.files:
        assert (layout / "blobs/sha256" / locked.sha256).stat().st_size == locked.size
    # Copied elsewhere (the air gap), pulled by the digest the push printed.
    moved = tmp_path / "carried-in"
    layout.rename(moved)
    hub.reset_counts()
    node = fresh_home(tmp_path, "node")
    synced = run_kernlock("sync", "--from", f"oci-layout:{moved}@{mirror.index}", cwd=project,
                          env={**node, "HF_HUB_OFFLINE": "1"})  # no Hub needed, nor asked
    assert synced.returncode == 0, synced.stderr
    assert hub.log == []
    verified = run_kernlock("verify", "--cache", cwd=project, env={**node, "HF_HUB_OFFLINE": "1"})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # A changed blob in the layout is refused as from a registry.
    blob = moved / "blobs/sha256" / variant.files[0].sha256
    blob.chmod(0o644)
    blob.write_bytes(b"x" * variant.files[0].size)
    refused = run_kernlock("sync", "--from", f"oci-layout:{moved}", cwd=project, env=fresh_home(tmp_path, "other"))
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert f"sent {variant.files[0].path} with sha256:" not in line  # named with its variant
    assert f"sent {variant.name}/{variant.files[0].path} with sha256:" in line and variant.files[0].sha256 in line


@pytest.mark.parametrize("destination, problem", [
    ("oci://user:secret@127.0.0.1:5000/team/kernels", "credentials in the URL are refused"),
    ("oci://127.0.0.1:5000/Team/kernels", "is not NAMESPACE/NAME"),
    ("oci://127.0.0.1:5000/team/kernels@sha256:" + "a" * 64, "a push names a tag, not a digest"),
])
def test_a_bad_destination_is_one_line_and_nothing_is_pushed(
    locked_project: LockedProjectFactory, destination: str, problem: str
) -> None:
    project, _ = locked_project([FA2])
    before = (project / "kernels.lock").read_bytes()
    result = run_kernlock("vendor", "--to", destination, cwd=project)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert problem in line and "secret" not in line and "; fix: " in line
    assert (project / "kernels.lock").read_bytes() == before


@pytest.mark.slow
def test_a_registry_that_is_down_is_one_line_naming_it(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project, _ = locked_project([FA2])
    from registry import _free_port

    url = f"oci://127.0.0.1:{_free_port()}/team/kernels"
    result = run_kernlock("sync", "--from", url, cwd=project, env=fresh_home(tmp_path, "node"))
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert "team/kernels: manifest latest failed (ConnectError" in line
    assert "fix: check that the registry 127.0.0.1:" in line


@pytest.mark.slow
def test_credentials_come_from_the_docker_config_and_never_reach_the_lock(
    hub: TestHub, locked_project: LockedProjectFactory, tmp_path: Path
) -> None:
    """A registry that asks for a login (Basic, htpasswd): without credentials the push is one line naming the login
    to run; with the entry `docker login` writes in `$DOCKER_CONFIG/config.json`, push and pull work, and neither the
    password nor its base64 form is in the lock."""
    project, _ = locked_project([FA2])
    root = tmp_path / "registry"
    root.mkdir()
    with running_registry(root, login=True) as registry:
        docker = tmp_path / "docker"
        docker.mkdir()
        env = {"DOCKER_CONFIG": str(docker)}
        refused = run_kernlock("vendor", "--to", registry.url(), cwd=project, env=env)
        assert refused.returncode == 1
        [line] = refused.stderr.strip().splitlines()
        assert f"kernlock: error: {registry.host}/team/kernels: " in line and " failed (HTTP 401" in line
        assert f"fix: log in with an account that may push to it: `docker login {registry.host}`" in line
        # what `docker login 127.0.0.1:PORT` (or `oras login`) writes
        secret = base64.b64encode(b"ci:s3cret").decode()
        (docker / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": secret}}}))
        pushed = run_kernlock("vendor", "--to", registry.url(), cwd=project, env=env)
        assert pushed.returncode == 0, pushed.stderr
        text = (project / "kernels.lock").read_text()
        assert f'url = "{registry.url()}"' in text and "s3cret" not in text and secret not in text
        pulled = run_kernlock("sync", "--from", registry.url(), cwd=project, env={**env, **fresh_home(tmp_path, "n")})
        assert pulled.returncode == 0, pulled.stderr


def test_a_pull_reads_only_this_machine_s_variant(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    """Two locked targets pushed, one pulled: the node reads the index, its own variant's manifest and blobs, and
    nothing of the other variant."""
    project, lock = locked_project([FA2], [CPU, CPU_212])
    [entry] = lock.kernels
    mine, other = entry.variant_for(CPU), entry.variant_for(CPU_212)
    assert mine.name != other.name
    pushed = cli("vendor", "--to", registry.url(), "--json", cwd=project)
    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.output)["variants"] == 2
    served = registry.log.read_text()
    synced = run_kernlock("sync", "--from", registry.url(), cwd=project, env=fresh_home(tmp_path, "node"))
    assert synced.returncode == 0, synced.stderr
    pulled = [line.split('"GET ', 1)[1].split()[0] for line in registry.log.read_text()[len(served):].splitlines()
              if '"GET /v2/' in line]
    [index] = load_lockfile(project / "kernels.lock").mirrors
    manifests = {path.rsplit("/", 1)[1] for path in pulled if "/manifests/" in path}
    blobs = {path.rsplit("/", 1)[1] for path in pulled if "/blobs/" in path}
    assert manifests == {index.index, variant_manifest(entry, mine).digest}
    assert blobs == {f"sha256:{f.sha256}" for f in mine.files}
    assert not blobs & {f"sha256:{f.sha256}" for f in other.files if f.sha256 not in {g.sha256 for g in mine.files}}


@pytest.mark.slow
def test_the_recorded_digest_pins_the_index_when_its_tag_moves(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    """Another lock pushed under the same tag later: a pull by the location still gets this lock's index (the digest
    its `[[mirror]]` records); that other index, named by its digest, is refused naming what it lacks."""
    project, lock = locked_project([f"{FA2}@v2"])
    other, other_lock = locked_project([f"{FA2}@v4"], root=tmp_path / "q")
    assert lock.kernels[0].commit != other_lock.kernels[0].commit
    assert cli("vendor", "--to", registry.url(), cwd=project).exit_code == 0
    assert cli("vendor", "--to", registry.url(), cwd=other).exit_code == 0  # the tag now names q's index
    [theirs] = load_lockfile(other / "kernels.lock").mirrors
    synced = run_kernlock("sync", "--from", registry.url(), cwd=project, env=fresh_home(tmp_path, "a"))
    assert synced.returncode == 0, synced.stderr
    refused = run_kernlock("sync", "--from", f"{registry.url()}@{theirs.index}", cwd=project,
                           env=fresh_home(tmp_path, "b"))
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    variant = lock.kernels[0].variant_for(CPU).name
    assert (f"{FA2}@v2: {registry.url()}@{theirs.index} holds no {variant} at {lock.kernels[0].commit[:12]} "
            "(its index was pushed from another lock, or for other targets or groups)") in line
    assert line.endswith(f"fix: push this lock's kernels there: `kernlock vendor --to {registry.url()}`")
    assert run_kernlock("vendor", "--to", registry.url(), cwd=project).returncode == 0  # the fix, as printed
    again = run_kernlock("sync", "--from", registry.url(), cwd=project, env=fresh_home(tmp_path, "b"))
    assert again.returncode == 0, again.stderr


def test_concurrent_pulls_into_one_cache_fetch_each_blob_once(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    project, lock = locked_project([FA2])
    variant = lock.kernels[0].variant_for(CPU)
    assert cli("vendor", "--to", registry.url(), cwd=project).exit_code == 0
    served = len(registry.log.read_text())
    env = {**os.environ, "HF_HOME": str(tmp_path / "shared")}
    pulls = [subprocess.Popen([sys.executable, "-m", "kernlock", "sync", "--from", registry.url()], cwd=project,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for pull in pulls:
        _, err = pull.communicate(timeout=120)
        assert pull.returncode == 0, err
    blobs = Counter(line.split('"GET ', 1)[1].split()[0] for line in registry.log.read_text()[served:].splitlines()
                    if '"GET /v2/team/kernels/blobs/' in line)
    assert set(blobs) == {f"/v2/team/kernels/blobs/sha256:{f.sha256}" for f in variant.files}
    assert max(blobs.values()) == 1, blobs


def test_vendor_takes_a_directory_or_a_destination(locked_project: LockedProjectFactory, tmp_path: Path) -> None:
    project, _ = locked_project([FA2])
    for args in ((), (str(tmp_path / "v"), "--to", f"oci-layout:{tmp_path / 'l'}")):
        result = run_kernlock("vendor", *args, cwd=project)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [
            "kernlock: error: name a DIRECTORY or --to OCI (one of them): `kernlock vendor DIR`"]
    assert not (tmp_path / "v").exists() and not (tmp_path / "l").exists()
    repair = run_kernlock("vendor", "--repair", "--to", f"oci-layout:{tmp_path / 'l'}", cwd=project)
    assert repair.returncode == 2 and "--repair works on a vendor DIRECTORY" in repair.stderr


GROUPS = f'''
[tool.kernlock.groups]
training = ["{ACTIVATION}@v1", "{RELU}@v1"]
inference = ["{FA2}@v2"]
'''


def _pushed_repos(index: bytes) -> set[str]:
    return {m["annotations"]["dev.kernlock.repo"] for m in json.loads(index)["manifests"]}


@pytest.mark.slow
def test_vendor_to_a_registry_with_a_group_pushes_only_that_groups_variants(
    hub: TestHub, locked_project: LockedProjectFactory, registry: RunningRegistry, tmp_path: Path
) -> None:
    """As `vendor DIR --group`: the index holds the ungrouped entries and the group's, a node of that group pulls
    them with 0 Hub requests, and one of another group is refused with a fix that works."""
    project, lock = locked_project([f"{UNIVERSAL}@v1"], [CPU], extra=GROUPS)
    url = registry.url()
    pushed = cli("vendor", "--to", url, "--group", "training", "--json", cwd=project)
    assert pushed.exit_code == 0, pushed.output
    assert json.loads(pushed.output)["variants"] == 3
    [mirror] = load_lockfile(project / "kernels.lock").mirrors
    index = registry.get(f"/v2/team/kernels/manifests/{mirror.index}", "application/vnd.oci.image.index.v1+json")
    assert _pushed_repos(index) == {UNIVERSAL, ACTIVATION, RELU}
    hub.reset_counts()
    synced = run_kernlock("sync", "--from", url, "--group", "training", cwd=project, env=fresh_home(tmp_path, "a"))
    assert synced.returncode == 0, synced.stderr
    assert hub.log == []
    refused = run_kernlock("sync", "--from", url, "--group", "inference", cwd=project, env=fresh_home(tmp_path, "b"))
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert f"{FA2}@v2: {url}@{mirror.index} holds no " in line and "or for other targets or groups)" in line
    fix = line.split("`")[1]
    assert fix == f"kernlock vendor --to {url}"
    assert run_kernlock(*fix.split()[1:], cwd=project).returncode == 0  # the fix, as printed: every group
    again = run_kernlock("sync", "--from", url, "--group", "inference", cwd=project, env=fresh_home(tmp_path, "b"))
    assert again.returncode == 0, again.stderr


def test_vendor_to_an_oci_layout_with_a_group_and_an_unknown_group(
    hub: TestHub, locked_project: LockedProjectFactory, tmp_path: Path
) -> None:
    project, _ = locked_project([f"{UNIVERSAL}@v1"], [CPU], extra=GROUPS)
    layout = tmp_path / "layout"
    unknown = run_kernlock("vendor", "--to", f"oci-layout:{layout}", "--group", "inferense", cwd=project)
    assert unknown.returncode == 2 and not layout.exists()  # refused before anything is pushed
    [line] = unknown.stderr.strip().splitlines()
    assert line == (f"kernlock: error: unknown group 'inferense' (did you mean inference?); fix: run "
                    f"`kernlock vendor --to oci-layout:{layout} --group inference`")
    fixed = run_kernlock(*line.split("`")[1].split()[1:], cwd=project)
    assert fixed.returncode == 0, fixed.stderr
    [mirror] = load_lockfile(project / "kernels.lock").mirrors
    index = (layout / "blobs/sha256" / mirror.index.removeprefix("sha256:")).read_bytes()
    assert _pushed_repos(index) == {UNIVERSAL, FA2}
