"""The test Hub is real: the unmodified huggingface_hub, kernels and transformers clients work against it."""

from __future__ import annotations

import hashlib
import http.client
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import kernels
import pytest
import torch
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder

from helpers import FA2, REPO_ROOT, clear_loaded_kernels
from kernlock.testing.fixtures import (
    advance_branch,
    build_fixture_repos,
    default_fixtures_dir,
    git,
    move_branch,
    push_commit,
    rev_parse,
)
from kernlock.testing.hub import TestHub

CPU_VARIANT = "torch213-cxx11-cpu-x86_64-linux"
CPU_BUILD = f"build/{CPU_VARIANT}"
CPU_FILES = ["metadata.json", "flash_attn2/__init__.py", "flash_attn2/_identity.py", "flash_attn2/_ops.so"]


def _blob(hub: TestHub, repo_id: str, rev: str, path: str) -> bytes:
    return git(hub.repo_path(repo_id), "cat-file", "blob", f"{rev}:{path}")


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url) as response:
        return response.read()


@pytest.mark.slow
def test_fixture_repos_are_deterministic(tmp_path: Path, fixture_repos_template: dict[str, Path]) -> None:
    rebuilt = build_fixture_repos(default_fixtures_dir(), tmp_path)
    for repo_id, path in fixture_repos_template.items():
        assert git(rebuilt[repo_id], "for-each-ref") == git(path, "for-each-ref")


def test_list_repo_refs_matches_git(hub: TestHub) -> None:
    refs = HfApi().list_repo_refs("kernels-community/tagged", repo_type="kernel")
    repo = hub.repo_path("kernels-community/tagged")
    assert {b.name for b in refs.branches} == {"main", "v1", "dev"}
    assert {t.name for t in refs.tags} == {"v1.0.0", "release-2026-01"}
    for ref in [*refs.branches, *refs.tags]:
        assert ref.target_commit == rev_parse(repo, ref.ref)
    fa2 = HfApi().list_repo_refs(FA2, repo_type="kernel")
    assert {b.name for b in fa2.branches} == {"main", "v1", "v2", "v3", "v4"}


def test_list_repo_tree_expand_reports_blobs_and_lfs(hub: TestHub) -> None:
    api = HfApi()
    tree = list(api.list_repo_tree(FA2, CPU_BUILD, recursive=True, expand=True, revision="v2", repo_type="kernel"))
    files = {e.path: e for e in tree if isinstance(e, RepoFile)}
    assert {e.path for e in tree if isinstance(e, RepoFolder)} == {f"{CPU_BUILD}/flash_attn2"}
    assert set(files) == {f"{CPU_BUILD}/{name}" for name in CPU_FILES}
    for path, entry in files.items():
        content = _blob(hub, FA2, "v2", path)
        assert entry.size == len(content)
        assert entry.last_commit is not None
        if path.endswith(".so"):
            assert entry.lfs is not None
            assert entry.lfs.sha256 == hashlib.sha256(content).hexdigest()
            assert entry.lfs.size == len(content)
        else:
            assert entry.lfs is None
            assert entry.blob_id == git(hub.repo_path(FA2), "rev-parse", f"v2:{path}").decode().strip()
    variants = {e.path for e in api.list_repo_tree(FA2, "build", revision="v1", repo_type="kernel")}
    assert f"build/{CPU_VARIANT}" not in variants and len(variants) == 12


def test_get_paths_info(hub: TestHub) -> None:
    infos = HfApi().get_paths_info(FA2, ["README.md", "build", "missing.txt"], revision="v3", repo_type="kernel")
    assert [(type(i), i.path) for i in infos] == [(RepoFile, "README.md"), (RepoFolder, "build")]


def test_download_regular_and_lfs_files(hub: TestHub) -> None:
    for path in (f"{CPU_BUILD}/metadata.json", f"{CPU_BUILD}/flash_attn2/_ops.so"):
        local = hf_hub_download(FA2, path, revision="v4", repo_type="kernel")
        assert Path(local).read_bytes() == _blob(hub, FA2, "v4", path)
        assert rev_parse(hub.repo_path(FA2), "v4") in local


def test_snapshot_download_allow_patterns(hub: TestHub) -> None:
    folder = Path(snapshot_download(FA2, revision="v3", repo_type="kernel", allow_patterns=[f"{CPU_BUILD}/*"]))
    assert folder.name == rev_parse(hub.repo_path(FA2), "v3")
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert files == sorted(f"{CPU_BUILD}/{name}" for name in CPU_FILES)
    for name in files:
        assert (folder / name).read_bytes() == _blob(hub, FA2, "v3", name)


def test_errors_have_hub_shape(hub: TestHub) -> None:
    api = HfApi()
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_refs("kernels-community/nope", repo_type="kernel")
    with pytest.raises(RevisionNotFoundError):
        list(api.list_repo_tree(FA2, revision="v99", repo_type="kernel"))
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(FA2, "build/missing.txt", revision="v4", repo_type="kernel")


def test_organization_overview_trust(hub: TestHub) -> None:
    api = HfApi()
    # huggingface_hub sets the Hub's fields it does not declare as attributes: its type does not name this one
    assert api.get_organization_overview("kernels-community").trustedKernelPublisher is True  # type: ignore[attr-defined]
    assert api.get_organization_overview("untrusted-org").trustedKernelPublisher is False  # type: ignore[attr-defined]
    with pytest.raises(HfHubHTTPError):
        api.get_organization_overview("no-such-org")


@pytest.mark.parametrize("version", [2, 4])
def test_get_kernel_loads_cpu_variant_of_version_branch(hub: TestHub, version: int) -> None:
    kernel = kernels.get_kernel(FA2, version=version)
    # SIM300 takes the upper-case attribute for a constant: the loaded kernel's identity is the actual value here
    assert kernel.KERNEL_IDENTITY == {  # noqa: SIM300
        "repo": FA2,
        "build": f"flash-attn2 v{version} #2",
        "variant": CPU_VARIANT,
        "commit": rev_parse(hub.repo_path(FA2), f"v{version}"),
    }


def test_get_kernel_without_compatible_variant(hub: TestHub) -> None:
    with pytest.raises(FileNotFoundError, match="Cannot find a build variant"):
        kernels.get_kernel(FA2, version=1)


def test_get_kernel_untrusted_publisher(hub: TestHub) -> None:
    with pytest.raises(ValueError, match="not from a trusted publisher"):
        kernels.get_kernel("untrusted-org/some-kernel", version=1)
    kernel = kernels.get_kernel("untrusted-org/some-kernel", version=1, trust_remote_code=True)
    assert kernel.KERNEL_IDENTITY["build"] == "some-kernel v1 #1"


def test_get_kernel_revisions_tags_and_noarch(hub: TestHub) -> None:
    tagged = kernels.get_kernel("kernels-community/tagged", revision="v1.0.0")
    assert tagged.KERNEL_IDENTITY["build"] == "tagged v1 #1"
    universal = kernels.get_kernel("kernels-community/universal", version=1)
    assert universal.KERNEL_IDENTITY["variant"] == "torch-universal"
    assert torch.equal(universal.add(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


def test_kernel_dependency_is_loaded(hub: TestHub) -> None:
    kernel = kernels.get_kernel("kernels-community/with-dep", version=1)
    assert kernel.DEP_IDENTITY["repo"] == "kernels-community/activation"
    assert kernel.DEP_IDENTITY["build"] == "activation v1 #2"
    x = torch.randn(3, 8)
    assert torch.allclose(kernel.gated(x), torch.nn.functional.silu(x[:, :4]) * x[:, 4:])


def test_layer_repository(hub: TestHub) -> None:
    layer_cls = kernels.LayerRepository(
        repo_id="kernels-community/activation", layer_name="SiluAndMul", version=1
    ).load()
    x = torch.randn(2, 3, 8)
    assert torch.allclose(layer_cls()(x), torch.nn.functional.silu(x[..., :4]) * x[..., 4:])


def test_transformers_llama_runs_through_fixture_kernel(hub: TestHub) -> None:
    from transformers import AutoModelForCausalLM, LlamaConfig

    def config() -> LlamaConfig:  # one per model: the model keeps its config's attention implementation
        return LlamaConfig(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            intermediate_size=128,
        )

    torch.manual_seed(0)
    reference = AutoModelForCausalLM.from_config(config(), attn_implementation="sdpa", dtype=torch.float32)
    model = AutoModelForCausalLM.from_config(config(), attn_implementation=FA2, dtype=torch.float32)
    assert reference.config._attn_implementation == "sdpa"
    model.load_state_dict(reference.state_dict())
    kernel = sys.modules[kernels.get_loaded_kernels()[0].metadata.id]
    assert kernel.KERNEL_IDENTITY["build"] == "flash-attn2 v4 #2"

    input_ids = torch.randint(0, 128, (2, 12))
    calls = dict(kernel.CALLS)
    logits = model(input_ids).logits
    assert kernel.CALLS["flash_attn_func"] - calls["flash_attn_func"] == 2  # one per layer
    torch.testing.assert_close(logits, reference(input_ids).logits, atol=1e-5, rtol=1e-5)
    assert kernel.CALLS["flash_attn_func"] - calls["flash_attn_func"] == 2  # the reference did not call it
    logits.sum().backward()
    assert model.model.layers[0].self_attn.q_proj.weight.grad is not None

    mask = torch.ones_like(input_ids)
    mask[1, 8:] = 0  # right padding takes the varlen path
    padded = model(input_ids, attention_mask=mask).logits
    expected = reference(input_ids, attention_mask=mask).logits
    torch.testing.assert_close(padded[mask.bool()], expected[mask.bool()], atol=1e-5, rtol=1e-5)
    assert kernel.CALLS["flash_attn_varlen_func"] - calls["flash_attn_varlen_func"] == 2


def test_moving_a_branch_changes_unlocked_loads(hub: TestHub, fresh_kernels: None) -> None:
    """The problem kernlock solves: `version=4` silently follows the moving `v4` branch."""
    before = kernels.get_kernel(FA2, version=4).KERNEL_IDENTITY
    new_sha = advance_branch(hub.repo_path(FA2), "v4")
    clear_loaded_kernels()
    after = kernels.get_kernel(FA2, version=4).KERNEL_IDENTITY
    assert before["build"] == "flash-attn2 v4 #2"
    assert after["build"] == "flash-attn2 v4 #2 (moved)"
    assert after["commit"] == new_sha != before["commit"]


def test_push_commit_and_move_branch(hub: TestHub) -> None:
    repo = hub.repo_path(FA2)
    old = rev_parse(repo, "v3")
    new = push_commit(repo, "v3", {f"{CPU_BUILD}/{name}": None for name in CPU_FILES}, "Drop the CPU build")
    assert git(repo, "rev-parse", f"{new}^").decode().strip() == old
    with pytest.raises(FileNotFoundError, match="Cannot find a build variant"):
        kernels.get_kernel(FA2, version=3)
    move_branch(repo, "v3", old)
    assert kernels.get_kernel(FA2, version=3).KERNEL_IDENTITY["commit"] == old


def test_fixture_attention_matches_sdpa_with_gqa_and_bottom_right_causal_mask(hub: TestHub) -> None:
    kernel = kernels.get_kernel(FA2, version=4)
    q, k, v = torch.randn(2, 3, 4, 16), torch.randn(2, 7, 2, 16), torch.randn(2, 7, 2, 16)
    mask = torch.ones(3, 7, dtype=torch.bool).tril(diagonal=7 - 3)  # flash-attn aligns causal bottom-right
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, enable_gqa=True
    ).transpose(1, 2)
    torch.testing.assert_close(kernel.flash_attn_func(q, k, v, causal=True), expected)
    cu_q, cu_k = torch.tensor([0, 3, 6]), torch.tensor([0, 7, 14])
    flat_q, flat_k, flat_v = (x.flatten(0, 1) for x in (q, k, v))
    varlen = kernel.flash_attn_varlen_func(flat_q, flat_k, flat_v, cu_q, cu_k, 3, 7, causal=True)
    torch.testing.assert_close(varlen, expected.flatten(0, 1))


def test_request_counters(hub: TestHub) -> None:
    kernels.get_kernel(FA2, version=4)
    clear_loaded_kernels()
    hub.reset_counts()
    kernels.get_kernel(FA2, version=4)  # warm cache: metadata only
    print("warm get_kernel requests:", dict(hub.requests), hub.log)
    assert hub.requests["overview"] == 1
    assert hub.requests["refs"] == 1
    assert hub.requests["tree"] >= 1
    assert hub.bytes_sent > 0
    assert len(hub.log) == sum(hub.requests.values())


def test_status_fault_and_latency(hub: TestHub) -> None:
    api = HfApi()
    hub.add_fault("status", match=r"/refs$", times=1, code=500)
    with pytest.raises(HfHubHTTPError) as error:
        api.list_repo_refs(FA2, repo_type="kernel")
    assert error.value.response.status_code == 500
    assert api.list_repo_refs(FA2, repo_type="kernel").branches  # the fault is used up
    assert hub.fired == {"status": 1}

    hub.add_fault("delay", match="overview", seconds=0.3)
    start = time.monotonic()
    api.get_organization_overview("kernels-community")
    assert time.monotonic() - start >= 0.3
    assert hub.fired["delay"] == 1

    hub.latency = 0.2
    start = time.monotonic()
    api.list_repo_refs(FA2, repo_type="kernel")
    assert time.monotonic() - start >= 0.2


def test_truncated_download_is_resumed(hub: TestHub) -> None:
    path = f"{CPU_BUILD}/flash_attn2/_ops.so"
    hub.add_fault("truncate", match=r"_ops\.so$", method="GET")
    local = hf_hub_download(FA2, path, revision="v4", repo_type="kernel")
    assert Path(local).read_bytes() == _blob(hub, FA2, "v4", path)
    # the second GET resumes (Range); requests for other paths (a client's own background calls) are not counted
    methods = [method for method, logged in hub.log if logged.split("?")[0].endswith(("_ops.so", path))]
    assert methods == ["HEAD", "GET", "GET"], hub.log
    assert hub.fired == {"truncate": 1}


def test_corrupt_and_reset_faults(hub: TestHub) -> None:
    url = f"{hub.url}/kernels/{FA2}/resolve/v4/README.md"
    hub.add_fault("corrupt", match="README")
    assert _get(url) != _blob(hub, FA2, "v4", "README.md")
    hub.add_fault("reset", match="README")
    with pytest.raises((OSError, http.client.HTTPException)):
        _get(url)
    assert _get(url) == _blob(hub, FA2, "v4", "README.md")
    assert hub.fired == {"corrupt": 1, "reset": 1}


@pytest.mark.slow
def test_cli_serves_fixture_repos(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "kernlock.testing.hub", "--port", "0", "--workdir", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("HF_ENDPOINT=http://127.0.0.1:")
        refs = json.loads(_get(f"{line.split('=', 1)[1]}/api/kernels/{FA2}/refs"))
        assert {b["name"] for b in refs["branches"]} == {"main", "v1", "v2", "v3", "v4"}
    finally:
        process.terminate()
    assert process.wait(timeout=10) == 0
